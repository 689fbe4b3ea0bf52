package store

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// foldStore opens a store whose records hold the characters where Go's
// case folding and SQLite's differ: non-ASCII capitals in keys and values,
// U+212A (Kelvin, folds with k), U+017F (long s, folds with s), U+0130
// (dotted capital I, lowers to i), a NUL in a value.
func foldStore(tb testing.TB) (*Store, []string) {
	s := openSearchStore(tb, SearchConfig{})
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
// spelling still narrows: a filter reads only the rows of the fields that
// may equal its property or members without case, and a property or member
// with more spellings than maxSpellings is scanned by its longest prefix
// with fewer, not by reading every field.
func TestSearchFold_NarrowingStaysNarrow(t *testing.T) {
	s, rids := foldStore(t)
	ctx := context.Background()
	for _, c := range []struct {
		f    SearchFilter
		rows int // the rows of kv_field_v the filter may read
	}{
		{SearchFilter{Property: "genre", Values: []string{"kids"}}, 4},   // genre: Kids, İndie, kids, drama
		{SearchFilter{Property: "genre", Values: []string{"INDIE"}}, 4},  // the same
		{SearchFilter{Property: "Kind", Values: []string{"movie"}}, 2},   // kind, Kind
		{SearchFilter{Property: "über", Values: []string{"ja"}}, 2},      // Über, über
		{SearchFilter{Property: "tags", Values: []string{"kids"}}, 2},    // tags/Kids, tags/kids
		{SearchFilter{Property: "sssssss", Values: []string{"x"}}, 0},    // 128 spellings: the prefix ssssss, 64
		{SearchFilter{Property: "TAGS", Values: []string{"комедия"}}, 0}, // 256 member spellings: a prefix
	} {
		st, err := beginSearch(ctx, s.cacheR)
		if err != nil {
			t.Fatal(err)
		}
		set, err := st.filterSet(ctx, c.f)
		if err != nil {
			t.Fatal(err)
		}
		if st.cost.rows > c.rows {
			t.Errorf("%+v: read %d rows, want at most %d", c.f, st.cost.rows, c.rows)
		}
		var want []string
		for _, rid := range rids {
			fields, err := st.record(ctx, rid)
			if err != nil {
				t.Fatal(err)
			}
			if matchFilters(fields, []SearchFilter{c.f}) {
				want = append(want, rid)
			}
		}
		if !slices.Equal(set, want) {
			t.Errorf("%+v: %v, the exact check finds %v", c.f, set, want)
		}
		st.end()
	}
}

// A value of seven non-ASCII letters has 256 member spellings, past
// maxSpellings: the filter still narrows, to the fields starting with a
// spelling of the member's longest prefix with fewer, instead of reading
// every record (review 8, R8-2).
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
	rid, err := s.Resolve(ctx, cid)
	if err != nil {
		t.Fatal(err)
	}
	st, err := beginSearch(ctx, s.cacheR)
	if err != nil {
		t.Fatal(err)
	}
	defer st.end()
	set, err := st.filterSet(ctx, SearchFilter{Property: "TAGS", Values: []string{"комедия"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(set, []string{rid}) || st.cost.rows != 1 {
		t.Fatalf("filter: %v after %d rows, want %s after 1 (its member's)", set, st.cost.rows, rid)
	}
	hits, total, err := s.Search(ctx, SearchQuery{Filters: []SearchFilter{{Property: "TAGS", Values: []string{"комедия"}}}})
	if err != nil || total != 1 || len(hits) != 1 || hits[0].RID != rid {
		t.Fatalf("search: %v (total %d) %v, want the one record", hits, total, err)
	}
}

// FuzzFoldKey: foldKey gives two strings the same key exactly when
// strings.EqualFold finds them equal.
func FuzzFoldKey(f *testing.F) {
	for _, s := range [][2]string{{"Kelvin", "\u212Aelvin"}, {"ſtudio", "STUDIO"}, {"σς", "ΣΣ"}, {"\xff", "\uFFFD"}, {"İ", "i"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if got, want := foldKey(a) == foldKey(b), strings.EqualFold(a, b); got != want {
			t.Fatalf("foldKey(%q) == foldKey(%q) is %v, EqualFold %v", a, b, got, want)
		}
	})
}

// FuzzKeyRanges: every valid key that strings.EqualFold finds equal to x
// is found by x's lookups (a spelling, or under a prefix scanned).
func FuzzKeyRanges(f *testing.F) {
	for _, s := range [][2]string{{"genres/Komedie", "GENRES/\u212Aomedie"}, {"sssssss", "ſſſſſſſ"}, {"tags/Комедия", "TAGS/комедия"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, key, x string) {
		if !utf8.ValidString(key) || !strings.EqualFold(key, x) {
			return
		}
		eq, prefix := keyRanges(x)
		low := sqlLower(key)
		if !slices.Contains(eq, low) && !slices.ContainsFunc(prefix, func(p string) bool { return strings.HasPrefix(low, p) }) {
			t.Fatalf("key %q (lowered %q) equals %q without case, but its lookups miss it: %q, prefixes %q", key, low, x, eq, prefix)
		}
		if len(eq) > maxSpellings || len(prefix) > maxSpellings {
			t.Fatalf("%q: %d keys and %d prefixes, more than %d", x, len(eq), len(prefix), maxSpellings)
		}
	})
}

// FuzzTokenLike: SQLite's LIKE with tokenLike's pattern matches every
// haystack whose strings.ToLower holds the token, whatever its bytes.
func FuzzTokenLike(f *testing.F) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	for _, s := range [][2]string{{"The Matrix", "atri"}, {"\u212Aelvin", "kelvin"}, {"\u0130nformer", "informer"}, {"a\xc0bc", "bc"}, {"100%_done", "0%_d"}, {"a\x00b", "b"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, hay, token string) {
		token = strings.ToLower(token)
		if token == "" || strings.ContainsFunc(token, unicode.IsSpace) || !strings.Contains(strings.ToLower(hay), token) {
			return
		}
		pat, ok := tokenLike(token)
		if !ok {
			return
		}
		var match bool
		if err := db.QueryRow(`SELECT ? LIKE ? ESCAPE '\' OR instr(?, char(0)) > 0`, hay, pat, hay).Scan(&match); err != nil {
			t.Fatal(err)
		}
		if !match {
			t.Fatalf("%q holds %q, but LIKE %q misses it", hay, token, pat)
		}
	})
}
