package store_test

import (
	"slices"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// TestSearch_FoldsAsTheExactCheck: Search's exact check folds case with
// Go's Unicode rules (strings.EqualFold for keys, strings.ToLower for
// values and tokens), SQLite's lower(), LIKE and the trigram index fold
// ASCII (and some others) only. Each case is a record the exact check
// accepts: the SQL narrowing must not drop it. The cases marked "held"
// passed before; the others were dropped until the narrowing looked keys
// up under every spelling EqualFold accepts, let such characters of a
// value match any character and cut tokens at i.
func TestSearch_FoldsAsTheExactCheck(t *testing.T) {
	s := open(t, store.Config{})
	sg := storetest.Signer(0)
	filter := func(prop string, exact bool, values ...string) store.SearchQuery {
		return store.SearchQuery{Filters: []store.SearchFilter{{Property: prop, Values: values, Exact: exact}}}
	}
	cases := []struct {
		name       string
		key, value string
		q          store.SearchQuery
	}{
		// A property with a non-ASCII capital, spelt the same.
		{"PropertyNonASCIICapital", "Über", "ja", filter("Über", false, "ja")},
		{"PropertyNonASCIICapitalOtherCase", "ÜBERSETZUNG", "ja", filter("übersetzung", true, "JA")},
		{"MemberNonASCIICapitalProperty", "Ärger/Kino", "true", filter("Ärger", false, "Kino")},
		{"MemberNonASCIIValueOtherCase", "genres/COMÉDIE", "true", filter("genres", false, "comédie")}, // held
		// A value holding a character that lowers to an ASCII letter.
		{"ValueKelvinSign", "genre", "\u212Aids", filter("genre", false, "kids")},
		{"ValueDottedCapitalI", "genre", "\u0130ndie", filter("genre", true, "indie")},
		{"ValueNonASCIIOtherCase", "studio", "GÖTEBORG FILM", filter("studio", false, "göteborg")}, // held
		// A stored key whose case partner is an ASCII letter.
		{"KeyKelvinSign", "\u212Aind", "movie", filter("kind", false, "movie")},
		{"KeyLongS", "\u017Ftudio", "ghibli", filter("studio", false, "ghibli")},
		// A value with a NUL, which LIKE does not read past.
		{"ValueNUL", "note", "a\x00kids", filter("note", false, "kids")},
		// Tokens: the trigram index folds U+212A but not U+0130.
		{"TokenKelvinSign", "title", "\u212Aelvin", store.SearchQuery{Query: "kelvin"}}, // held
		{"TokenDottedCapitalI", "title", "\u0130nformer", store.SearchQuery{Query: "informer"}},
		// Edges that held (the reviewer's list).
		{"FilterPercentUnderscore", "title", "100%_done", filter("title", false, "0%_d")},
		{"TokenQuoteStar", "title", `say "hi"*`, store.SearchQuery{Query: `"hi"*`}},
		{"TokenTwoChars", "title", "Up", store.SearchQuery{Query: "up"}},
	}
	for i, c := range cases {
		submit(t, s, sg.Text(storetest.CID(3000+i), c.key, c.value, 1))
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rid, err := s.Resolve(ctx, storetest.CID(3000+i))
			if err != nil {
				t.Fatal(err)
			}
			hits, total, err := s.Search(ctx, c.q)
			if err != nil {
				t.Fatalf("search: %v", err)
			}
			if !slices.ContainsFunc(hits, func(h store.SearchHit) bool { return h.RID == rid }) {
				t.Errorf("record %s (%s=%q) not found by %+v (total %d)", rid, c.key, c.value, c.q, total)
			}
		})
	}
	// Paging edges: past the end, a huge limit, a negative offset.
	all, total, err := s.Search(ctx, store.SearchQuery{Limit: 1 << 30})
	if err != nil || len(all) != total || total != len(cases) {
		t.Fatalf("huge limit: %d hits, total %d, err %v", len(all), total, err)
	}
	past, total2, err := s.Search(ctx, store.SearchQuery{Offset: 1 << 30})
	if err != nil || len(past) != 0 || total2 != total {
		t.Fatalf("offset past the end: %d hits, total %d, err %v", len(past), total2, err)
	}
	neg, _, err := s.Search(ctx, store.SearchQuery{Offset: -5, Limit: 2})
	if err != nil || len(neg) != 2 {
		t.Fatalf("negative offset: %d hits, err %v", len(neg), err)
	}
}
