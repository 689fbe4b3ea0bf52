package store

import (
	"context"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// foldStore opens a store whose records hold the characters where Go's
// case folding and SQLite's differ: non-ASCII capitals in keys and values,
// U+212A (Kelvin, folds with k), U+017F (long s, folds with s), U+0130
// (dotted capital I, lowers to i), a NUL in a value.
func foldStore(tb testing.TB) (*Store, []string) {
	dir := tb.TempDir()
	s := New(Config{TruthPath: filepath.Join(dir, "t.db"), CachePath: filepath.Join(dir, "c.db"), Trust: TrustOpen,
		Logger: slog.New(slog.DiscardHandler)})
	if err := s.Open(context.Background()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	sg, _ := GenerateSigner()
	fields := [][2]string{
		{"Über", "ja"}, {"über", "Nein"}, {"ÜBERSETZUNG", "Deutsch, ENGLISCH"}, {"Ärger/Kino", "true"},
		{"genres/COMÉDIE", "true"}, {"genres/comédie", "false"}, {"genre", "\u212Aids"}, {"genre", "\u0130ndie"},
		{"genre", "kids"}, {"genre", "drama"}, {"\u212Aind", "movie"}, {"kind", "Movie"}, {"\u017Ftudio", "ghibli"},
		{"studio", "GÖTEBORG FILM"}, {"note", "a\x00kids"}, {"title", "\u212Aelvin"}, {"title", "\u0130nformer"},
		{"title", "Informer"}, {"title", "ÉCOLE des fans"}, {"tags/\u212Aids", "true"}, {"tags/kids", "1"},
	}
	var claims []Claim
	for i, f := range fields {
		claims = append(claims, sg.Text(testCID(1000+i), f[0], f[1], 1))
	}
	if _, err := s.Submit(context.Background(), claims, SubmitOptions{}); err != nil {
		tb.Fatal(err)
	}
	rids, err := s.RIDs(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return s, rids
}

// FuzzSearchFold: for any query and filter, Search returns exactly what a
// scan of every record with the exact matchers finds, over records where
// Go's and SQLite's case folding differ.
func FuzzSearchFold(f *testing.F) {
	s, rids := foldStore(f)
	for _, seed := range []struct {
		query, prop, value string
		exact              bool
	}{
		{"", "Über", "ja", false}, {"", "über", "JA", true}, {"", "übersetzung", "englisch", false},
		{"", "Ärger", "Kino", false}, {"", "GENRES", "Comédie", false}, {"", "genre", "kids", false},
		{"", "genre", "indie", true}, {"", "kind", "movie", true}, {"", "STUDIO", "ghibli", false},
		{"", "studio", "göteborg", false}, {"", "note", "kids", false}, {"", "tags", "KIDS", false},
		{"kelvin", "", "", false}, {"informer", "", "", false}, {"école", "", "", false}, {"nformer ki", "", "", false},
		{"", "kisses/success", "sessions", false}, // past maxSpellings: no narrowing
	} {
		f.Add(seed.query, seed.prop, seed.value, seed.exact)
	}
	f.Fuzz(func(t *testing.T, query, prop, value string, exact bool) {
		searchMatchesScan(t, s, rids, query, prop, value, exact)
	})
}

// TestSearchFold_NarrowingStaysNarrow: looking keys up under every
// spelling still narrows: a filter's candidates are the records holding
// one of its spellings (not every record), and a filter with more
// spellings than maxSpellings does not narrow at all rather than miss.
func TestSearchFold_NarrowingStaysNarrow(t *testing.T) {
	s, _ := foldStore(t)
	ctx := context.Background()
	tx, err := s.cacheR.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	keysOf := func(set map[string]bool) []string {
		var out []string
		for rid := range set {
			fields, err := recordFields(ctx, tx, rid)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range fields {
				if !IsLinkKey(k) {
					out = append(out, k+"="+v)
				}
			}
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		f    SearchFilter
		want []string
	}{
		{SearchFilter{Property: "genre", Values: []string{"kids"}}, []string{"genre=kids", "genre=\u212Aids"}},
		{SearchFilter{Property: "genre", Values: []string{"INDIE"}}, []string{"genre=\u0130ndie"}},
		{SearchFilter{Property: "Kind", Values: []string{"movie"}}, []string{"kind=Movie", "\u212Aind=movie"}},
		{SearchFilter{Property: "über", Values: []string{"ja"}}, []string{"Über=ja"}},
		// A superset: EqualFold also wants equal lengths for members.
		{SearchFilter{Property: "tags", Values: []string{"kids"}}, []string{"tags/kids=1", "tags/\u212Aids=true"}},
	} {
		set, err := filterCandidates(ctx, tx, c.f)
		if err != nil {
			t.Fatal(err)
		}
		if set == nil {
			t.Fatalf("%+v: no narrowing", c.f)
		}
		if got := keysOf(set); !slices.Equal(got, c.want) {
			t.Errorf("%+v: candidates %q, want %q", c.f, got, c.want)
		}
	}
	long := SearchFilter{Property: strings.Repeat("s", 7), Values: []string{"x"}}
	if set, err := filterCandidates(ctx, tx, long); err != nil || set != nil {
		t.Fatalf("%d spellings: %v %v, want no narrowing", 1<<7, set, err)
	}
}

// A value of seven non-ASCII letters has 128 member spellings, past
// maxSpellings: the filter still narrows, to the property's members (and
// its flat values), instead of reading every record (review 8, R8-2).
func TestSearchFold_LongNonASCIIValueNarrows(t *testing.T) {
	s, _ := foldStore(t)
	ctx := context.Background()
	sg, err := GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	cid := testCID(880)
	if _, err := s.Submit(ctx, []Claim{sg.Text(cid, "tags/Комедия", "true", 1), sg.Text(cid, "title", "x", 1)}, SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	tx, err := s.cacheR.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	set, err := filterCandidates(ctx, tx, SearchFilter{Property: "TAGS", Values: []string{"комедия"}})
	if err != nil {
		t.Fatal(err)
	}
	if set == nil {
		t.Fatal("a filter on a value of 7 non-ASCII letters does not narrow: every record would be read")
	}
	rid, err := s.Resolve(ctx, cid)
	if err != nil {
		t.Fatal(err)
	}
	if !set[rid] {
		t.Fatalf("the record with the member is not a candidate: %v", set)
	}
	for r := range set {
		fields, err := recordFields(ctx, tx, r)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(slices.Collect(maps.Keys(fields)), func(k string) bool { return strings.HasPrefix(strings.ToLower(k), "tags") }) {
			t.Errorf("candidate %s has no tags field: %v", r, fields)
		}
	}
	hits, total, err := s.Search(ctx, SearchQuery{Filters: []SearchFilter{{Property: "TAGS", Values: []string{"комедия"}}}})
	if err != nil || total != 1 || len(hits) != 1 || hits[0].RID != rid {
		t.Fatalf("search: %v (total %d) %v, want the one record", hits, total, err)
	}
}
