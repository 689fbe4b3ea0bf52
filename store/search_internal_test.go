package store

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
)

func testCID(i int) string {
	d := sha256.Sum256(fmt.Appendf(nil, "search %d", i))
	m, _ := mh.Encode(d[:], mh.SHA2_256)
	return cid.NewCidV1(cid.Raw, m).String()
}

// openSearchStore opens a store in a temporary directory for the search
// tests, closed at the end of the test.
func openSearchStore(tb testing.TB, search SearchConfig) *Store {
	dir := tb.TempDir()
	s := New(Config{TruthPath: filepath.Join(dir, "t.db"), CachePath: filepath.Join(dir, "c.db"), Trust: TrustOpen,
		Search: search, Logger: slog.New(slog.DiscardHandler)})
	if err := s.Open(context.Background()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// FuzzSearch checks that the SQL narrowing never loses a hit: for any
// query and filter, Search returns exactly the records a scan of every
// record with the same matchers finds.
func FuzzSearch(f *testing.F) {
	s := openSearchStore(f, SearchConfig{})
	sg, _ := GenerateSigner()
	titles := []string{"The Matrix", "Amélie", "ÉCOLE des fans", "Straße", "100% Pure", "under_score", "Matrix, The", "ma"}
	var claims []Claim
	for i, t := range titles {
		c := testCID(i)
		claims = append(claims, sg.Text(c, "title", t, 1), sg.Text(c, "genres/"+[]string{"Drama", "Comédie", "Action"}[i%3], []string{"true", "false", "1"}[i%3], 1),
			sg.Text(c, "languages", []string{"eng, fra", "deu", "FRA,ita"}[i%3], 1))
	}
	if _, err := s.Submit(context.Background(), claims, SubmitOptions{}); err != nil {
		f.Fatal(err)
	}
	for _, seed := range [][4]string{{"matrix", "genres", "drama", "0"}, {"AMÉ", "languages", "fra", "1"}, {"%", "GENRES", "comédie", "0"}, {"_", "title", "the", "1"}, {"", "", "", "0"},
		{"0", "title", " ", "0"}, {"00\x00", "0", "0", "0"}} { // found by the fuzzer: an untrimmed flat value, a NUL in a token
		f.Add(seed[0], seed[1], seed[2], seed[3] == "1")
	}
	ctx := context.Background()
	rids, _ := s.RIDs(ctx)
	f.Fuzz(func(t *testing.T, query, prop, value string, exact bool) {
		searchMatchesScan(t, s, rids, query, prop, value, exact)
	})
}

// searchMatchesScan checks that Search with query and one filter (none
// when prop is "") finds exactly the records of rids that a scan with the
// exact matchers finds, and says so in its total: both with filters read
// through their lookups and checked on each candidate's fields.
func searchMatchesScan(t *testing.T, s *Store, rids []string, query, prop, value string, exact bool) {
	t.Helper()
	ctx := context.Background()
	q := SearchQuery{Query: query, Limit: 1000}
	if prop != "" {
		q.Filters = []SearchFilter{{Property: prop, Values: []string{value}, Exact: exact}}
	}
	if checkSearch(q) != nil {
		return
	}
	var want []string
	for _, rid := range rids {
		rec, err := s.Record(ctx, rid, "")
		if err != nil {
			t.Fatal(err)
		}
		if matchTokens(rid, rec.Fields, tokenize(query)) && matchFilters(rec.Fields, q.Filters) {
			want = append(want, rid)
		}
	}
	defer func(each int) { s.sp.each = each }(s.sp.each)
	for _, each := range []int{0, searchEach} {
		s.sp.each = each
		hits, total, err := s.Search(ctx, q)
		if err != nil {
			t.Fatalf("search %+v: %v", q, err)
		}
		var got []string
		for _, h := range hits {
			got = append(got, h.RID)
		}
		if !slices.Equal(got, want) || total != len(want) {
			t.Fatalf("search %+v (each %d): got %v (total %d), a scan finds %v", q, each, got, total, want)
		}
	}
}
