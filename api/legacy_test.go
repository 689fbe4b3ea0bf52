package api_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/store"
)

// newLegacyEnv is a server that signs legacy writes with its own key.
func newLegacyEnv(t *testing.T) (*env, *store.Signer) {
	t.Helper()
	key, err := store.GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, withAPI(func(c *api.Config) { c.LegacySigner = key })), key
}

// metaSortPath is a property path as meta-sort's writer builds it: each
// segment URL-encoded, the slashes kept.
func metaSortPath(h, key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "/meta/" + url.PathEscape(h) + "/" + strings.Join(segs, "/")
}

func (e *env) record(h string) map[string]string {
	e.t.Helper()
	var rec api.RecordResponse
	e.get("/meta/"+h).decode(e.t, &rec)
	return rec.Metadata
}

// A meta-sort session through the real server: PATCH a file's fields,
// PUT one property, read them back through every read route, DELETE a
// property, then the record; the answers are upstream's shapes.
func TestLegacy_RoundTrip(t *testing.T) {
	t.Parallel()
	e, key := newLegacyEnv(t)
	flat := map[string]string{
		"title": "Inception", "year": "2010", "fileName": "inception.mkv",
		"cids/" + cidB: "true", "cids/" + cidA: "true", // meta-sort lists the record's own cid too
		"filePath": "/files/watch/inception.mkv", "mtimeNano": "1", // the watcher's: dropped
		"video/codec": "h265", "genres/Action": "true", "empty": "",
	}
	var patched api.LegacyMetaResponse
	e.sendJSON("PATCH", "/meta/"+cidA, flat).decode(t, &patched)
	if !patched.Success || !store.IsRID(patched.HashID) || patched.Updated == nil || *patched.Updated != len(flat) {
		t.Fatalf("PATCH answered %+v, want success, the rid and updated %d", patched, len(flat))
	}
	rid := patched.HashID

	var put api.LegacyMetaResponse
	e.sendJSON("PUT", metaSortPath(cidA, "plot/eng"), map[string]string{"value": "A thief / a dream"}).decode(t, &put)
	if !put.Success || put.HashID != rid || put.Property != "plot/eng" {
		t.Fatalf("PUT property answered %+v", put)
	}
	// A raw text body is the value too (upstream's other form).
	e.rawReq("PUT", metaSortPath(rid, "tagline"), "", "Your mind is the scene", "Content-Type", "text/plain").decode(t, &put)

	want := map[string]string{
		"title": "Inception", "year": "2010", "fileName": "inception.mkv", "video/codec": "h265",
		"genres/Action": "true", "empty": "", "plot/eng": "A thief / a dream", "tagline": "Your mind is the scene",
		"cids/" + cidA: "true", "cids/" + cidB: "true",
	}
	for _, h := range []string{cidA, cidB, rid, strings.ToLower(rid)} {
		got := e.record(h)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("GET /meta/%s: %s = %q, want %q", h, k, got[k], v)
			}
		}
		if _, ok := got["filePath"]; ok {
			t.Errorf("GET /meta/%s: filePath %q came from a legacy write: only the watcher's is the box's", h, got["filePath"])
		}
	}
	var meta api.MetaResponse
	e.get("/api/meta/"+cidB).decode(t, &meta)
	if meta.RID != rid || meta.Metadata["title"] != "Inception" || meta.CanonicalCID != cidA {
		t.Errorf("/api/meta: %+v", meta)
	}
	var md api.RecordResponse
	e.get("/api/metadata/"+rid).decode(t, &md)
	if md.Metadata["plot/eng"] != "A thief / a dream" {
		t.Errorf("/api/metadata: %+v", md)
	}
	if a := e.get(metaSortPath(rid, "plot/eng")); a.status != 200 || string(a.body) != "A thief / a dream" {
		t.Errorf("GET the property: %d %q", a.status, a.body)
	}
	e.get(metaSortPath(rid, "empty")).wantError(t, http.StatusNotFound, "unknown_root") // upstream: empty is absent
	var hits api.SearchResponse
	e.sendJSON("POST", "/api/metadata/search", map[string]any{"query": "inception"}).decode(t, &hits)
	if hits.Count != 1 || hits.Results[0].HashID != rid {
		t.Errorf("search: %+v", hits)
	}
	var ids api.HashIDsResponse
	e.get("/meta").decode(t, &ids)
	if !slices.Contains(ids.HashIDs, rid) {
		t.Errorf("GET /meta %v lacks %s", ids.HashIDs, rid)
	}
	var claims api.GroupClaimsResponse
	e.get("/api/metadata/"+rid+"/claims?uid="+key.UID()).decode(t, &claims)
	if len(claims.Claims) != len(want)-1 { // every key but the record's own cid link
		t.Errorf("the legacy writer signed %d claims, want %d", len(claims.Claims), len(want)-1)
	}

	// DELETE a property: gone from every route.
	var del api.LegacyMetaResponse
	e.do("DELETE", metaSortPath(rid, "title"), nil).decode(t, &del)
	if !del.Success || del.HashID != rid || del.Property != "title" {
		t.Errorf("DELETE property answered %+v", del)
	}
	e.get(metaSortPath(cidB, "title")).wantError(t, http.StatusNotFound, "unknown_root")
	if _, ok := e.record(rid)["title"]; ok {
		t.Error("title still in the record after its DELETE")
	}

	// DELETE the record, as meta-sort's deleteMetadataFlat reads it.
	e.do("DELETE", "/meta/"+url.PathEscape(cidA), nil).decode(t, &del)
	if !del.Success || del.Deleted == nil || *del.Deleted != len(want)-2 { // all but the own link and title
		t.Errorf("DELETE record answered %+v, want deleted %d", del, len(want)-2)
	}
	// Its retractions still describe the record (they are votes that
	// travel): it keeps its cids and nothing else.
	for _, h := range []string{rid, cidA} {
		for k := range e.record(h) {
			if !strings.HasPrefix(k, store.LinkPrefix) {
				t.Errorf("GET /meta/%s after DELETE still has %s", h, k)
			}
		}
	}
	// A second DELETE finds nothing: 200 and 0, as upstream.
	e.do("DELETE", "/meta/"+cidA, nil).decode(t, &del)
	if *del.Deleted != 0 {
		t.Errorf("second DELETE: %+v", del)
	}
}

// Writes in quick succession: each later one wins, even within one
// millisecond (the writer's ts only goes up).
func TestLegacy_LastWriteWins(t *testing.T) {
	t.Parallel()
	e, _ := newLegacyEnv(t)
	for i := range 20 {
		v := strings.Repeat("x", i+1)
		e.sendJSON("PATCH", "/meta/"+cidA, map[string]string{"title": v}).decode(t, new(api.LegacyMetaResponse))
		if got := e.record(cidA)["title"]; got != v {
			t.Fatalf("write %d: title %q, want %q", i, got, v)
		}
		e.do("DELETE", "/meta/"+cidA+"/title", nil).decode(t, new(api.LegacyMetaResponse))
	}
}

// A delete withdraws only what legacy writes said: another signer's vote
// on the same key stays and shows.
func TestLegacy_DeleteLeavesOtherSigners(t *testing.T) {
	t.Parallel()
	e, _ := newLegacyEnv(t)
	e.post(e.text(cidA, "title", "Signed", e.ts(-1000)))
	e.sendJSON("PATCH", "/meta/"+cidA, map[string]string{"year": "2010"}).decode(t, new(api.LegacyMetaResponse))
	var del api.LegacyMetaResponse
	e.do("DELETE", "/meta/"+cidA, nil).decode(t, &del)
	if *del.Deleted != 1 {
		t.Errorf("deleted %d, want 1 (the legacy writer's year)", *del.Deleted)
	}
	got := e.record(cidA)
	if got["title"] != "Signed" || got["year"] != "" {
		t.Errorf("after DELETE: %v, want the signed title and no year", got)
	}
}

// _add keeps a "|"-separated set, as upstream's AddToSet.
func TestLegacy_AddToSet(t *testing.T) {
	t.Parallel()
	e, _ := newLegacyEnv(t)
	for i, c := range []struct {
		value string
		added bool
		after string
	}{{"action", true, "action"}, {"drama", true, "action|drama"}, {"action", false, "action|drama"}} {
		var res api.LegacyMetaResponse
		e.sendJSON("POST", "/meta/"+cidA+"/_add/tags", map[string]string{"value": c.value}).decode(t, &res)
		if res.Added == nil || *res.Added != c.added || res.Property != "tags" || !store.IsRID(res.HashID) {
			t.Errorf("add %d: %+v", i, res)
		}
		if got := e.record(cidA)["tags"]; got != c.after {
			t.Errorf("add %d: tags %q, want %q", i, got, c.after)
		}
	}
	e.sendJSON("POST", "/meta/"+cidA+"/_add/tags", map[string]string{"value": ""}).wantError(t, 400, "schema_violation")
	e.sendJSON("POST", "/meta/"+cidA+"/_add", map[string]string{"value": "x"}).wantError(t, 400, "schema_violation")
}

// The editor's routes under /api/metadata, and the batch: one bad update
// fails alone.
func TestLegacy_MetadataRoutes(t *testing.T) {
	t.Parallel()
	e, _ := newLegacyEnv(t)
	var up api.LegacyMetadataResponse
	e.sendJSON("PUT", "/api/metadata/"+cidA, map[string]string{"title": "Heat", "processingStatus": "done"}).decode(t, &up)
	if up.Status != "ok" || !store.IsRID(up.HashID) || up.Message == "" {
		t.Fatalf("PUT /api/metadata answered %+v", up)
	}
	rid := up.HashID
	if got := e.record(rid); got["title"] != "Heat" || got["processingStatus"] != "" {
		t.Errorf("after PUT: %v (processingStatus is dropped, as upstream)", got)
	}
	e.sendJSON("PUT", "/api/metadata/"+rid+"/property", map[string]string{"property": "year", "value": "1995"}).decode(t, &up)
	if up.Property != "year" || up.Value == nil || *up.Value != "1995" || up.HashID != rid {
		t.Errorf("PUT property answered %+v", up)
	}
	e.sendJSON("PUT", "/api/metadata/"+rid+"/property", map[string]string{"value": "1995"}).wantError(t, 400, "schema_violation")

	var batch api.LegacyBatchResponse
	e.sendJSON("POST", "/api/metadata/batch", map[string]any{"updates": []any{
		map[string]any{"hashId": rid, "metadata": map[string]string{"title": "Heat (1995)"}, "properties": map[string]string{"title": "Heat!", "rating": "8"}},
		map[string]any{"metadata": map[string]string{"title": "x"}},
		map[string]any{"hashId": cidB, "metadata": map[string]string{"bad//key": "x", "title": "never"}},
		map[string]any{"hashId": "notacid", "metadata": map[string]string{"title": "x"}},
		map[string]any{"hashId": cidC, "properties": map[string]string{"title": "Dune"}},
	}}).decode(t, &batch)
	if batch.Status != "completed" || batch.Total != 5 || batch.Success != 2 || batch.Errors != 3 {
		t.Fatalf("batch answered %+v", batch)
	}
	if r := batch.Results[1]; r.HashID != "unknown" || r.Error != "Missing hash ID" {
		t.Errorf("missing hashId: %+v", r)
	}
	if r := batch.Results[2]; r.Status != "error" || !strings.Contains(r.Error, "bad//key") {
		t.Errorf("bad key: %+v", r)
	}
	if got := e.record(rid); got["title"] != "Heat!" || got["rating"] != "8" {
		t.Errorf("after batch: %v (properties are set after metadata)", got)
	}
	e.get("/meta/"+cidB).wantError(t, http.StatusNotFound, "unknown_root")
	if got := e.record(cidC); got["title"] != "Dune" || batch.Results[4].HashID == cidC {
		t.Errorf("batch on a new cid: %v, answered %+v", got, batch.Results[4])
	}
	e.sendJSON("POST", "/api/metadata/batch", map[string]any{"updates": []any{}}).wantError(t, 400, "schema_violation")

	var del api.LegacyMetadataResponse
	e.do("DELETE", "/api/metadata/"+rid, nil).decode(t, &del)
	if del.Status != "ok" || del.DeletedKeys == nil || *del.DeletedKeys != 3 {
		t.Errorf("DELETE /api/metadata answered %+v, want deletedKeys 3", del)
	}
}

// Bad input gets a clear refusal and stores nothing, not even the good
// keys beside it.
func TestLegacy_BadInputChangesNothing(t *testing.T) {
	t.Parallel()
	e, key := newLegacyEnv(t)
	for _, c := range []struct {
		name, method, path, body string
		status                   int
		slug, says               string
	}{
		{"number value", "PATCH", "/meta/" + cidA, `{"title":"x","year":2010}`, 400, "schema_violation", `year`},
		{"not JSON", "PATCH", "/meta/" + cidA, `{"title":`, 400, "schema_violation", "not valid JSON"},
		{"array", "PUT", "/meta/" + cidA, `[{"title":"x"}]`, 400, "schema_violation", "object"},
		{"null body", "PATCH", "/meta/" + cidA, `null`, 400, "schema_violation", "object"},
		{"deprecated field", "PATCH", "/meta/" + cidA, `{"title":"x","cid_midhash256":"b"}`, 400, "deprecated_field", "cids/"},
		{"bad key", "PATCH", "/meta/" + cidA, `{"title":"x","a//b":"y"}`, 400, "bad_key", "a//b"},
		{"vouch", "PATCH", "/meta/" + cidA, `{"title":"x","vouch/` + key.UID() + `":"true"}`, 400, "reserved_key", "trust"},
		{"link value", "PATCH", "/meta/" + cidA, `{"title":"x","cids/` + cidB + `":"yes"}`, 400, "schema_violation", "true"},
		{"too long", "PATCH", "/meta/" + cidA, `{"title":"` + strings.Repeat("x", store.MaxValueBytes+1) + `"}`, 413, "too_large", "title"},
		{"not canonical", "PATCH", "/meta/" + strings.ToUpper(cidA), `{"title":"x"}`, 400, "bad_cid", "canonical form"},
		{"not a ref", "PUT", "/meta/notacid/title", `{"value":"x"}`, 400, "bad_cid", "not a rid or a cid"},
		{"unknown rid", "PATCH", "/meta/01J2VFBRD0FCY8TBJFB9NQS3CY", `{"title":"x"}`, 404, "unknown_root", "01J2VFBRD0FCY8TBJFB9NQS3CY"},
		{"property body", "PUT", "/api/metadata/" + cidA + "/property", `{"property":1}`, 400, "schema_violation", `property`},
		{"batch body", "POST", "/api/metadata/batch", `{"updates":{}}`, 400, "schema_violation", `updates`},
	} {
		a := e.rawReq(c.method, c.path, "", c.body, "Content-Type", "application/json")
		a.wantError(t, c.status, c.slug)
		if !strings.Contains(string(a.body), c.says) {
			t.Errorf("%s: %s does not say %s", c.name, a.body, c.says)
		}
	}
	e.get("/meta/"+cidA).wantError(t, http.StatusNotFound, "unknown_root")
	var st store.Stats
	e.get("/api/stats").decode(t, &st)
	if st.Claims != 0 {
		t.Errorf("%d claims stored by refused writes", st.Claims)
	}
}
