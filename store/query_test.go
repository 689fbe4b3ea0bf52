package store_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

func TestSearch(t *testing.T) {
	a := storetest.Signer(1)
	s := open(t, store.Config{})
	c1, c2, c3, c4 := storetest.CID(11), storetest.CID(12), storetest.CID(13), storetest.MidhashCID(14)
	submit(t, s,
		a.Text(c1, "title", "The Matrix", 1), a.Text(c1, "genres/Action", "true", 1), a.Text(c1, "genres/SciFi", "true", 1),
		a.Text(c1, "year", "1999", 1), a.Text(c1, "languages", "eng, fra", 1),
		a.Text(c2, "title", "Matrix Reloaded", 1), a.Text(c2, "genres/Action", "false", 1), a.Text(c2, "year", "2003", 1),
		a.Text(c3, "title", "Amélie", 1), a.Text(c3, "originaltitle", "Le Fabuleux Destin d'Amélie Poulain", 1),
		a.Text(c3, "genres/Romance", "true", 1), a.Text(c3, "languages", "fra", 1),
	)
	applyFiles(t, s, store.FileUpdate{Op: store.FileAdd, File: lf("/films/inception.mkv", c4, 5)})
	rid := func(c string) string { return record(t, s, c).RID }
	r1, r2, r3, r4 := rid(c1), rid(c2), rid(c3), rid(c4)
	sorted := func(rs ...string) []string { slices.Sort(rs); return rs }
	cases := []struct {
		name string
		q    store.SearchQuery
		want []string
	}{
		{"Everything", store.SearchQuery{}, sorted(r1, r2, r3, r4)},
		{"Token", store.SearchQuery{Query: "matrix"}, sorted(r1, r2)},
		{"TokensAnd", store.SearchQuery{Query: "MATRIX reloaded"}, []string{r2}},
		// Short tokens and no-hit tokens hold a letter Crockford base32 never uses (i, l, o, u),
		// so a random rid in the haystack cannot match them.
		{"ShortToken", store.SearchQuery{Query: "ix"}, sorted(r1, r2)},
		{"NonASCIIToken", store.SearchQuery{Query: "AMÉLIE"}, []string{r3}},
		{"OriginalTitle", store.SearchQuery{Query: "poulain"}, []string{r3}},
		{"FilePath", store.SearchQuery{Query: "inception"}, []string{r4}},
		{"RID", store.SearchQuery{Query: strings.ToLower(r3[10:20])}, []string{r3}},
		{"NoHit", store.SearchQuery{Query: "zzuu"}, nil},
		{"KeySetMemberTruthy", store.SearchQuery{Filters: []store.SearchFilter{{Property: "genres", Values: []string{"action"}}}}, []string{r1}},
		{"ValuesOr", store.SearchQuery{Filters: []store.SearchFilter{{Property: "genres", Values: []string{"Romance", "Action"}}}}, sorted(r1, r3)},
		{"FlatExactCommaSplit", store.SearchQuery{Filters: []store.SearchFilter{{Property: "languages", Values: []string{"FRA"}, Exact: true}}}, sorted(r1, r3)},
		{"FlatSubstring", store.SearchQuery{Filters: []store.SearchFilter{{Property: "languages", Values: []string{"fr"}}}}, sorted(r1, r3)},
		{"FlatExactNoPartial", store.SearchQuery{Filters: []store.SearchFilter{{Property: "languages", Values: []string{"fr"}, Exact: true}}}, nil},
		{"FiltersAnd", store.SearchQuery{Filters: []store.SearchFilter{
			{Property: "genres", Values: []string{"Action"}}, {Property: "year", Values: []string{"2003"}, Exact: true}}}, nil},
		{"FilterAndToken", store.SearchQuery{Query: "matrix", Filters: []store.SearchFilter{{Property: "year", Values: []string{"2003"}}}}, []string{r2}},
		{"AbsentFieldFails", store.SearchQuery{Filters: []store.SearchFilter{{Property: "director", Values: []string{"x"}}}}, nil},
		{"PropertyCaseInsensitive", store.SearchQuery{Filters: []store.SearchFilter{{Property: "Genres", Values: []string{"SCIFI"}}}}, []string{r1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hits, total, err := s.Search(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range hits {
				got = append(got, h.RID)
				if len(h.Fields) == 0 {
					t.Fatal("hit without fields")
				}
			}
			if !slices.Equal(got, tc.want) || total != len(tc.want) {
				t.Fatalf("hits=%v total=%d, want %v", got, total, tc.want)
			}
		})
	}
	hits, total, err := s.Search(ctx, store.SearchQuery{Offset: 1, Limit: 2})
	if err != nil || total != 4 || len(hits) != 2 || hits[0].RID != sorted(r1, r2, r3, r4)[1] {
		t.Fatalf("page: %d hits, total %d, %v", len(hits), total, err)
	}
	// Garbage input is refused cleanly or matches nothing; it never fails the store.
	for _, q := range []string{`"`, `*`, `AND OR NOT`, `a"b`, "\x00", `%_\`} {
		if _, _, err := s.Search(ctx, store.SearchQuery{Query: q, Filters: []store.SearchFilter{{Property: q, Values: []string{q}}}}); err != nil {
			t.Fatalf("query %q: %v", q, err)
		}
	}
}

func TestListSchemaStats(t *testing.T) {
	a := storetest.Signer(1)
	s := open(t, store.Config{})
	submit(t, s,
		a.Text(cidA, "title", "A", 1), a.Text(cidA, "year", "1999", 1), a.Text(cidA, "streams/0/language", "eng", 1),
		a.Text(cidB, "title", "B", 1), a.Text(cidB, "year", "unknown", 1), a.Text(cidB, "streams/1/language", "fra", 1),
		a.Text(cidB, "rating", "7.5", 1), a.Text(cidB, "hdr", "true", 1),
	)
	items, total, err := s.List(ctx, 0, 1)
	if err != nil || total != 2 || len(items) != 1 {
		t.Fatalf("list=%v total=%d %v", items, total, err)
	}
	rest, _, _ := s.List(ctx, 1, 10)
	all := append(items, rest...)
	if len(all) != 2 || all[0].RID >= all[1].RID || (all[0].Title != "A" && all[0].Title != "B") || all[0].Year == "" {
		t.Fatalf("list=%+v", all)
	}
	schema, err := s.Schema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]store.SchemaField{
		"title":              {Type: "string", Count: 2},
		"year":               {Type: "mixed", Count: 2},
		"streams/*/language": {Type: "string", Count: 2},
		"rating":             {Type: "float", Count: 1},
		"hdr":                {Type: "bool", Count: 1},
		"cids/*":             {Type: "bool", Count: 2},
	}
	for k, w := range want {
		if schema[k] != w {
			t.Fatalf("schema[%s]=%+v, want %+v (all: %v)", k, schema[k], w, schema)
		}
	}
	submit(t, s, a.Retraction(cidB, "hdr", 2))
	if schema, _ = s.Schema(ctx); schema["hdr"].Count != 0 {
		t.Fatalf("hdr after retraction=%+v", schema["hdr"])
	}
}

func TestKV(t *testing.T) {
	s := open(t, store.Config{})
	if err := s.KVPut(ctx, "btmagnet:x", "v1"); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := s.KVGet(ctx, "btmagnet:x"); err != nil || !ok || v != "v1" {
		t.Fatalf("get=%q %v %v", v, ok, err)
	}
	if _, ok, _ := s.KVGet(ctx, "nope"); ok {
		t.Fatal("missing key exists")
	}
	if ok, err := s.KVDelete(ctx, "btmagnet:x"); err != nil || !ok {
		t.Fatalf("delete=%v %v", ok, err)
	}
	if ok, _ := s.KVDelete(ctx, "btmagnet:x"); ok {
		t.Fatal("second delete found the key")
	}
	for _, k := range []string{"file:x", "cid:x", "idx:x", "ev:x", "evhwm:x", "meta:applied_seq"} {
		if err := s.KVPut(ctx, k, "x"); !errors.Is(err, store.ErrReservedKV) || store.Slug(err) != "schema_violation" {
			t.Fatalf("put %s: %v", k, err)
		}
		if _, _, err := s.KVGet(ctx, k); !errors.Is(err, store.ErrReservedKV) {
			t.Fatalf("get %s: %v", k, err)
		}
		if _, err := s.KVDelete(ctx, k); !errors.Is(err, store.ErrReservedKV) {
			t.Fatalf("delete %s: %v", k, err)
		}
	}
	if err := s.KVPut(ctx, "", "x"); err == nil {
		t.Fatal("empty key accepted")
	}
}

func TestClear(t *testing.T) {
	own, a := storetest.Signer(1), storetest.Signer(2)
	s := open(t, store.Config{Trust: store.TrustList, OwnUID: own.UID()})
	<-s.SyncReady()
	if err := s.Trust(ctx, a.UID(), "keep me"); err != nil {
		t.Fatal(err)
	}
	submit(t, s, a.Text(cidA, "title", "x", 1), a.Text(cidA, "year", "1", 1), a.Retraction(cidB, "title", 1))
	addFiles(t, s, 0, 2)
	if err := s.KVPut(ctx, "scratch", "v"); err != nil {
		t.Fatal(err)
	}
	sub, _ := s.Subscribe(store.StreamMeta, "0")
	cursor := nextEvent(t, sub).ID
	sub.Close()
	n, err := s.Clear(ctx)
	if err != nil || n != 3 {
		t.Fatalf("clear=%d %v, want 3 claims", n, err)
	}
	st, _ := s.Stats(ctx)
	if st.Records != 0 || st.Claims != 0 || st.Tombstones != 0 || st.Files.Count != 0 || st.Signers != 0 {
		t.Fatalf("stats after clear=%+v", st)
	}
	if _, err := s.Record(ctx, cidA, ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("record survived clear")
	}
	if _, ok, _ := s.KVGet(ctx, "scratch"); ok {
		t.Fatal("scratch key survived clear")
	}
	if s.SyncSet().Len() != 0 {
		t.Fatalf("sync set holds %d items after clear", s.SyncSet().Len())
	}
	if !s.Trusted(a.UID()) {
		t.Fatal("clear dropped the trust list")
	}
	if after, err := s.Subscribe(store.StreamMeta, cursor); err != nil || after.Gap == nil {
		t.Fatalf("old cursor after clear: %v gap=%v", err, after.Gap)
	} else {
		after.Close()
	}
	// The store works as new afterwards.
	if r := submit(t, s, a.Text(cidA, "title", "again", 5))[0]; r.Outcome != store.Accepted {
		t.Fatalf("after clear: %v %v", r.Outcome, r.Err)
	}
	if rids, _ := s.RIDs(ctx); len(rids) != 1 {
		t.Fatalf("rids=%v", rids)
	}
}
