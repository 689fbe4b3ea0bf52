package api_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/store"
)

// keysOf returns the sorted top-level keys of a JSON object.
func keysOf(t testing.TB, b []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return slices.Sorted(maps.Keys(m))
}

func wantKeys(t testing.TB, b []byte, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := keysOf(t, b); !slices.Equal(got, want) {
		t.Errorf("keys %v, want %v in %s", got, want, b)
	}
}

// seeded is an env with one record: cidA linked to cidB, two signers.
type seeded struct {
	*env
	other *store.Signer
	rid   string
}

func newSeeded(t *testing.T) *seeded {
	e := newEnv(t)
	other, err := store.GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	res := e.post(
		e.text(cidA, "title", "Inception", e.ts(-3000)),
		e.text(cidA, "year", "2010", e.ts(-3000)),
		e.text(cidA, "cids/"+cidB, "true", e.ts(-3000)),
		e.text(cidA, "genres/0", "Sci-Fi", e.ts(-3000)),
		other.Text(cidB, "title", "Origen", e.ts(-1000)),
	)
	if res.Accepted != 5 {
		t.Fatalf("seed: %+v", res)
	}
	rec, err := e.c.Meta(t.Context(), cidA, api.MetaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &seeded{env: e, other: other, rid: rec.RID}
}

func TestMeta(t *testing.T) {
	e := newSeeded(t)
	a := e.get("/api/meta/" + cidA)
	wantKeys(t, a.body, "cid", "rid", "metadata", "cids", "canonical_cid", "duplicates")
	var m api.MetaResponse
	a.decode(t, &m)
	if m.CID != cidA || !store.IsRID(m.RID) || m.CanonicalCID != cidA {
		t.Errorf("meta: %+v", m)
	}
	if !slices.Equal(m.CIDs, []string{cidA, cidB}) && !slices.Equal(m.CIDs, []string{cidB, cidA}) {
		t.Errorf("cids %v", m.CIDs)
	}
	if m.Metadata["title"] != "Inception" || m.Metadata["year"] != "2010" || m.Metadata["genres/0"] != "Sci-Fi" ||
		m.Metadata["cids/"+cidB] != "true" {
		t.Errorf("metadata %v", m.Metadata)
	}
	if m.Duplicates == nil || len(m.Duplicates) != 0 || !strings.Contains(string(a.body), `"duplicates":[]`) {
		t.Errorf("duplicates %v in %s", m.Duplicates, a.body)
	}

	// The other cid of the group names the same record.
	var viaB api.MetaResponse
	e.get("/api/meta/"+cidB).decode(t, &viaB)
	if viaB.RID != m.RID || viaB.CID != cidB {
		t.Errorf("via %s: %+v", cidB, viaB)
	}

	// ?as overlays that signer's own votes.
	var as api.MetaResponse
	e.get("/api/meta/"+cidA+"?as="+e.other.UID()).decode(t, &as)
	if as.Metadata["title"] != "Origen" {
		t.Errorf("as %s: title %q", e.other.UID(), as.Metadata["title"])
	}
	e.get("/api/meta/"+cidA+"?as=zNotAUID").wantError(t, 400, "bad_uid")

	// ?remote=1 goes through the node.
	m2, err := e.c.Meta(t.Context(), cidA, api.MetaOptions{Remote: true})
	if err != nil || m2.RID != m.RID || e.node.remotes != 1 {
		t.Errorf("remote: %+v, %v, %d calls", m2, err, e.node.remotes)
	}

	e.get("/api/meta/"+cidC).wantError(t, 404, "unknown_cid")
	e.get("/api/meta/not-a-cid").wantError(t, 404, "unknown_cid")
	e.get("/api/meta/"+cidC+"?remote=1").wantError(t, 404, "unknown_cid")
	// Not a cid: the same 404 as without ?remote=1 (no peer can know it).
	// A cid in a non-canonical form (trailing bits set) is the same 404
	// (http-api.md; review s9 store #4: it was a 400 bad_cid) with or
	// without ?remote=1, and the message names the canonical form.
	e.get("/api/meta/not-a-cid?remote=1").wantError(t, 404, "unknown_cid")
	for _, q := range []string{"", "?remote=1"} {
		a := e.get("/api/meta/bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab" + q)
		a.wantError(t, 404, "unknown_cid")
		wantMessage(t, "non-canonical"+q, envelope(t, a).Message, `the canonical form is "`+cidA+`"`)
	}
	if _, err := e.c.Meta(t.Context(), cidC, api.MetaOptions{}); !isNotFound(err) {
		t.Errorf("client: %v is not store.ErrNotFound", err)
	}
}

func TestMetaRoutes(t *testing.T) {
	e := newSeeded(t)

	a := e.get("/meta")
	wantKeys(t, a.body, "hashIds", "count")
	var ids api.HashIDsResponse
	a.decode(t, &ids)
	if ids.Count != 1 || !slices.Equal(ids.HashIDs, []string{e.rid}) {
		t.Errorf("/meta: %+v", ids)
	}
	var ids2 api.HashIDsResponse
	e.get("/api/metadata/hash-ids").decode(t, &ids2)
	if !slices.Equal(ids2.HashIDs, ids.HashIDs) {
		t.Errorf("hash-ids: %+v", ids2)
	}

	for _, h := range []string{e.rid, cidA, cidB} {
		for _, p := range []string{"/meta/", "/api/metadata/"} {
			a := e.get(p + h)
			wantKeys(t, a.body, "hashId", "metadata")
			var r api.RecordResponse
			a.decode(t, &r)
			if r.HashID != e.rid || r.Metadata["title"] != "Inception" {
				t.Errorf("%s%s: %+v", p, h, r)
			}
		}
	}
	e.get("/meta/"+cidC).wantError(t, 404, "unknown_root")
	e.get("/api/metadata/"+cidC).wantError(t, 404, "unknown_root")

	a = e.get("/meta/" + e.rid + "/title")
	if a.status != 200 || string(a.body) != "Inception" || !strings.HasPrefix(a.header.Get("Content-Type"), "text/plain") {
		t.Errorf("field: %d %q %q", a.status, a.header.Get("Content-Type"), a.body)
	}
	a = e.get("/meta/" + cidB + "/genres/0")
	if a.status != 200 || string(a.body) != "Sci-Fi" {
		t.Errorf("nested field: %d %q", a.status, a.body)
	}
	e.get("/meta/"+e.rid+"/nope").wantError(t, 404, "unknown_root")
	e.get("/meta/"+cidC+"/title").wantError(t, 404, "unknown_root")
}

func TestListSearchSchemaStats(t *testing.T) {
	e := newSeeded(t)
	e.post(e.text(cidC, "title", "Memento", e.ts(0)), e.text(cidC, "year", "2000", e.ts(0)))

	a := e.get("/api/metadata/list?offset=0&limit=10")
	wantKeys(t, a.body, "items", "count", "total")
	var l api.ListResponse
	a.decode(t, &l)
	if l.Count != 2 || l.Total != 2 || len(l.Items) != 2 {
		t.Fatalf("list: %+v", l)
	}
	titles := []string{l.Items[0].Title, l.Items[1].Title}
	slices.Sort(titles)
	if !slices.Equal(titles, []string{"Inception", "Memento"}) {
		t.Errorf("list titles %v", titles)
	}
	e.get("/api/metadata/list?offset=1&limit=1").decode(t, &l)
	if l.Count != 1 || l.Total != 2 {
		t.Errorf("page 2: %+v", l)
	}
	// limit=0 is upstream's default page (100), as for search: not one item.
	e.get("/api/metadata/list?limit=0").decode(t, &l)
	if l.Count != 2 || l.Total != 2 {
		t.Errorf("limit=0: %+v", l)
	}
	e.get("/api/metadata/list?limit=x").wantError(t, 400, "schema_violation")
	e.get("/api/metadata/list?offset=-1").wantError(t, 400, "schema_violation")

	search := func(req any) api.SearchResponse {
		t.Helper()
		a := e.sendJSON(http.MethodPost, "/api/metadata/search", req)
		wantKeys(t, a.body, "results", "count", "total")
		var r api.SearchResponse
		a.decode(t, &r)
		return r
	}
	if r := search(api.SearchRequest{Query: "INCEP"}); r.Count != 1 || r.Total != 1 || r.Results[0].HashID != e.rid {
		t.Errorf("query: %+v", r)
	}
	if r := search(api.SearchRequest{Filters: []api.SearchFilter{{Property: "year", Values: []string{"2000", "1999"}, Exact: true}}}); r.Count != 1 || r.Results[0].Metadata["title"] != "Memento" {
		t.Errorf("filter: %+v", r)
	}
	if r := search(api.SearchRequest{Query: "nothing-matches"}); r.Count != 0 || r.Results == nil {
		t.Errorf("no hits: %+v", r)
	}
	if r := search(api.SearchRequest{HashID: e.rid}); r.Count != 1 || r.Results[0].Metadata["year"] != "2010" {
		t.Errorf("by hashId: %+v", r)
	}
	for _, body := range garbageBodies {
		e.do(http.MethodPost, "/api/metadata/search", strings.NewReader(body)).wantError(t, 400, "schema_violation")
	}
	e.sendJSON(http.MethodPost, "/api/metadata/search", map[string]any{"limit": -1}).wantError(t, 400, "schema_violation")

	a = e.get("/api/schema")
	var sch api.SchemaResponse
	a.decode(t, &sch)
	if f := sch.Fields["title"]; f.Count != 2 || f.Type != "string" {
		t.Errorf("schema title: %+v (all: %v)", f, sch.Fields)
	}
	if _, ok := sch.Fields["genres/*"]; !ok {
		t.Errorf("schema does not fold numeric segments: %v", sch.Fields)
	}

	var st store.Stats
	e.get("/api/stats").decode(t, &st)
	if st.Records != 2 || st.Claims < 7 {
		t.Errorf("stats: %+v", st)
	}
}

func TestGroupClaims(t *testing.T) {
	e := newSeeded(t)
	for _, p := range []string{"/api/meta/" + cidB + "/claims", "/api/metadata/" + e.rid + "/claims"} {
		a := e.get(p)
		wantKeys(t, a.body, "rid", "cids", "claims")
		var g api.GroupClaimsResponse
		a.decode(t, &g)
		if g.RID != e.rid || len(g.CIDs) != 2 || len(g.Claims) != 5 {
			t.Fatalf("%s: rid %s, cids %v, %d claims", p, g.RID, g.CIDs, len(g.Claims))
		}
		for _, cj := range g.Claims {
			c, err := cj.Claim()
			if err != nil || c.Verify() != nil || cj.ID != c.ID().String() {
				t.Errorf("%s: listed claim %+v does not verify or lacks its id (%v)", p, cj, err)
			}
		}
	}
	var g api.GroupClaimsResponse
	e.get("/api/meta/"+cidA+"/claims?uid="+url.QueryEscape(e.other.UID())).decode(t, &g)
	if len(g.Claims) != 1 || g.Claims[0].UID != e.other.UID() {
		t.Errorf("?uid: %+v", g.Claims)
	}
	e.get("/api/meta/"+cidA+"/claims?key=title").decode(t, &g)
	if len(g.Claims) != 2 {
		t.Errorf("?key=title: %+v", g.Claims)
	}
	e.get("/api/meta/"+cidC+"/claims").wantError(t, 404, "unknown_cid")
	e.get("/api/metadata/"+cidC+"/claims").wantError(t, 404, "unknown_root")
}

func TestMerge(t *testing.T) {
	e := newSeeded(t)
	c1 := e.text(cidC, "title", "Memento", e.ts(0))
	c2 := e.other.Text(cidC, "title", "memento ", e.ts(1))
	bad := e.text(cidC, "filePath", "/x", e.ts(0))
	body := map[string]any{"claims": []any{c1.ToJSON(false), "garbage", c2.ToJSON(false), bad.ToJSON(false)}}
	a := e.sendJSON(http.MethodPost, "/api/merge", body)
	wantKeys(t, a.body, "fields", "nsrc", "rejected")
	var m api.MergeResponse
	a.decode(t, &m)
	if m.Fields["title"] != "Memento" || m.NSrc["title"] != 2 {
		t.Errorf("merge: %+v", m)
	}
	if len(m.Rejected) != 2 || m.Rejected[0].Index != 1 || m.Rejected[0].Error != "schema_violation" ||
		m.Rejected[1].Index != 3 || m.Rejected[1].Error != "reserved_key" {
		t.Errorf("rejected: %+v", m.Rejected)
	}
	// Nothing was stored.
	e.get("/api/meta/"+cidC).wantError(t, 404, "unknown_cid")
	for _, b := range garbageBodies {
		e.do(http.MethodPost, "/api/merge", strings.NewReader(b)).wantError(t, 400, "schema_violation")
	}
	e.sendJSON(http.MethodPost, "/api/merge", map[string]any{"claims": []any{}, "as": "zBad"}).wantError(t, 400, "bad_uid")
}

func TestHealthAndURLs(t *testing.T) {
	e := newEnv(t)
	h, err := e.c.Health(t.Context())
	if err != nil || h.Status != "ok" {
		t.Errorf("health: %+v %v", h, err)
	}
	a := e.get("/urls")
	wantKeys(t, a.body, "hostname", "baseUrl", "apiUrl", "redisUrl", "webdavUrl", "webdavUrlInternal")
	var u api.URLs
	a.decode(t, &u)
	if u.RedisURL != "" || u.APIURL != e.url || u.BaseURL != e.url {
		t.Errorf("urls: %+v (server %s)", u, e.url)
	}
}
