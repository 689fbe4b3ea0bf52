package store

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// costStore is a store of 60 records with the reference dataset's kind of
// fields (titles, years, genre key-sets, file names, plots), some of them
// with non-ASCII letters, and what a search's cost is bounded by: the
// records, the field rows, the most fields of one record.
type costStore struct {
	s                        *Store
	rids                     []string
	records, rows, maxFields int
}

func newCostStore(tb testing.TB) *costStore {
	s := openSearchStore(tb, SearchConfig{})
	sg, err := GenerateSigner()
	if err != nil {
		tb.Fatal(err)
	}
	words := []string{"The", "Night", "Up", "24", "Amélie", "Straße", "Über", "Kelvin", "Matrix", "İstanbul"}
	genres := []string{"Drama", "Comedy", "Action", "Comédie", "Ärger"}
	var claims []Claim
	for i := range 60 {
		c := testCID(5000 + i)
		title := words[i%len(words)] + " " + words[(i*7)%len(words)]
		claims = append(claims, sg.Text(c, "title", title, 1), sg.Text(c, "year", fmt.Sprint(1990+i%35), 1),
			sg.Text(c, "genres/"+genres[i%len(genres)], []string{"true", "false", "1"}[i%3], 1),
			sg.Text(c, "fileName", title+".mkv", 1), sg.Text(c, "plot", strings.Repeat(title+", ", i%5), 1),
			sg.Text(c, "languages", []string{"eng, fra", "deu", "FRA,ita"}[i%3], 1))
	}
	ctx := context.Background()
	if _, err := s.Submit(ctx, claims, SubmitOptions{}); err != nil {
		tb.Fatal(err)
	}
	cs := &costStore{s: s}
	if cs.rids, err = s.RIDs(ctx); err != nil {
		tb.Fatal(err)
	}
	cs.records = len(cs.rids)
	for _, rid := range cs.rids {
		rec, err := s.Record(ctx, rid, "")
		if err != nil {
			tb.Fatal(err)
		}
		cs.rows += len(rec.Fields)
		cs.maxFields = max(cs.maxFields, len(rec.Fields))
	}
	return cs
}

// pageSize is the number of records a page of q may hold.
func pageSize(q SearchQuery) int {
	if q.Limit <= 0 {
		return 100
	}
	return min(q.Limit, MaxSearchLimit)
}

// bound is the most a search of q may read: every search row, each
// filter every field row, the page's and the per-record check's records
// whole; the statements that takes; the trigrams of the longest
// full-text query.
func (cs *costStore) bound(q SearchQuery, each int) searchCost {
	page := min(pageSize(q), cs.records)
	nf := len(activeFilters(q.Filters))
	perFilter := (maxFilterKeys+inChunk-1)/inChunk + 2*maxSpellings
	return searchCost{
		rows:     2*cs.records + nf*cs.rows + (page+each)*cs.maxFields,
		queries:  3 + nf*perFilter + page + each,
		trigrams: ftsParts * (ftsPartLen - 2),
	}
}

// FuzzSearchCost: whatever a search holds within the limits, what it reads
// (rows, statements, trigrams of the full-text query: counters, not time)
// and what it allocates are bounded by the store's size, not by the
// request; a search past the limits is refused before it reads anything.
// The results are checked against a scan too.
func FuzzSearchCost(f *testing.F) {
	cs := newCostStore(f)
	for _, seed := range []struct {
		query, prop, values string
		exact               bool
		filters             uint8
		limit               uint16
	}{
		{"up", "title", "up|24", false, 1, 0},
		{"e", "genres", "drama|COMEDY|comédie", false, 3, 10000},
		{strings.Repeat("thethe ", 140), "plot", "the", false, 1, 5},
		{"", "languages", strings.Repeat("fr|", 255), true, 16, 100},
		{"kelvin istanbul", "Über", "ja", false, 2, 0},
		{strings.Repeat("é", 600), strings.Repeat("ß", 128), strings.Repeat("ǆ", 120), false, 16, 1},
		{"a b c d e f g h i j k l m n o p q r s t u v w x y z 1 2 3 4 5 6", "year", "19|20", false, 16, 60},
	} {
		f.Add(seed.query, seed.prop, seed.values, seed.exact, seed.filters, seed.limit)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, query, prop, values string, exact bool, filters uint8, limit uint16) {
		props := []string{prop, "title", "genres", "plot", "languages"}
		q := SearchQuery{Query: query, Limit: int(limit)}
		for i := range int(filters % (MaxSearchFilters + 2)) {
			q.Filters = append(q.Filters, SearchFilter{Property: props[i%len(props)], Values: strings.Split(values, "|"), Exact: exact})
		}
		if err := checkSearch(q); err != nil {
			SetSearchGate(cs.s, func(context.Context) error { t.Fatal("a search past the limits ran"); return nil })
			defer SetSearchGate(cs.s, nil)
			if _, err := cs.s.SearchEach(ctx, q, func(string, []Field) error { return nil }); !errors.Is(err, ErrQueryTooLong) && !errors.Is(err, ErrFiltersTooLarge) {
				t.Fatalf("SearchEach: %v, want a refusal", err)
			}
			return
		}
		defer func(each int) { cs.s.sp.each = each }(cs.s.sp.each)
		for _, each := range []int{0, searchEach} {
			cs.s.sp.each = each
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			var cost searchCost
			got := []string{}
			total, err := cs.s.search(ctx, q, &cost, func(rid string, _ []Field) error { got = append(got, rid); return nil })
			runtime.ReadMemStats(&ms1)
			if err != nil {
				t.Fatal(err)
			}
			b := cs.bound(q, each)
			if cost.rows > b.rows || cost.queries > b.queries || cost.trigrams > b.trigrams {
				t.Fatalf("%d filters, query of %d bytes: cost %+v, bound %+v", len(q.Filters), len(q.Query), cost, b)
			}
			// Allocations follow what was read, not what was asked.
			if alloc, most := ms1.TotalAlloc-ms0.TotalAlloc, uint64(256<<10+1024*cost.rows+16<<10*cost.queries); alloc > most {
				t.Fatalf("allocated %d bytes for %+v (at most %d)", alloc, cost, most)
			}
			if each == 0 {
				continue
			}
			var want []string
			for _, rid := range cs.rids {
				rec, err := cs.s.Record(ctx, rid, "")
				if err != nil {
					t.Fatal(err)
				}
				if matchTokens(rid, rec.Fields, tokenize(query)) && matchFilters(rec.Fields, q.Filters) {
					want = append(want, rid)
				}
			}
			if total != len(want) || !slices.Equal(got, want[:min(len(want), pageSize(q))]) {
				t.Fatalf("%+v: %v (total %d), a scan finds %v", q, got, total, want)
			}
		}
	})
}

// TestSearch_CancelStopsTheScan: a search whose caller goes away stops
// within checkEvery rows (the driver interrupts SQLite at once; the scan
// loop checks the context too) and frees its slot.
func TestSearch_CancelStopsTheScan(t *testing.T) {
	s := openSearchStore(t, SearchConfig{Slots: 1})
	sg, err := GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	const n = checkEvery + 100
	claims := make([]Claim, n)
	for i := range claims {
		claims[i] = sg.Text(testCID(20_000+i), "title", fmt.Sprintf("the title %d", i), 1)
	}
	if _, err := s.Submit(context.Background(), claims, SubmitOptions{Verified: true}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rows := 0
	s.sp.onRow = func() {
		if rows++; rows == 10 {
			cancel()
		}
	}
	_, err = s.SearchEach(ctx, SearchQuery{Query: "e"}, func(string, []Field) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("search cancelled after 10 of %d rows: %v", n, err)
	}
	if rows > 10+checkEvery {
		t.Fatalf("read %d rows after the cancel", rows-10)
	}
	s.sp.onRow = nil
	if _, total, err := s.Search(context.Background(), SearchQuery{Query: "title"}); err != nil || total != n {
		t.Fatalf("the next search: %d hits, %v", total, err)
	}
}
