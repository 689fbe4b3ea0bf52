package api_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipfs/go-cid"
	mbase "github.com/multiformats/go-multibase"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/store"
)

// otherForms writes a canonical cid in every other base a consumer might
// use: each parses as the same CID, none is canonical.
func otherForms(t testing.TB, s string) []string {
	t.Helper()
	c, err := cid.Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range []mbase.Encoding{mbase.Base58BTC, mbase.Base32Upper, mbase.Base64url, mbase.Base16, mbase.Base36} {
		f, err := c.StringOfBase(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

// A cid written in another base (or upper case) on a read route is the
// route's 404 (http-api.md: GET /api/meta/{cid} → 404 unknown_cid; review
// s9 store #4: it was a 400 bad_cid, and consumers read 404 as "not
// known"), whose message says how to write it; before that, the routes
// answered "not found" with no hint for content the node holds. The info
// route, 200 by contract, answers for the canonical form instead, and
// /file/{cid} serves what info says exists (TestFileServing_OtherCIDForm).
func TestReadRoutes_NonCanonicalCID(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.root, "plugin/a.txt"), "hello world content\n")
	reg, err := e.c.RegisterFile(t.Context(), "plugin/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	c := reg.CID
	if res := e.post(e.text(c, "title", "Hello", e.ts(0))); res.Accepted != 1 {
		t.Fatalf("seed: %+v", res)
	}
	routes := map[string]string{"/api/meta/%s": "unknown_cid", "/api/meta/%s?remote=1": "unknown_cid", "/api/meta/%s/claims": "unknown_cid",
		"/meta/%s": "unknown_root", "/meta/%s/title": "unknown_root", "/api/metadata/%s": "unknown_root",
		"/api/metadata/%s/claims": "unknown_root"}
	for _, form := range otherForms(t, c) {
		for r, slug := range routes {
			p := strings.Replace(r, "%s", form, 1)
			a := e.get(p)
			a.wantError(t, http.StatusNotFound, slug)
			var env api.Error
			_ = json.Unmarshal(a.body, &env)
			if !strings.Contains(env.Message, "is not in canonical form; the canonical form is \""+c+"\"") {
				t.Errorf("%s: message %q does not name the canonical form", p, env.Message)
			}
		}
	}
	// The client reads that 404 as "not known", as for any other miss.
	if _, err := e.c.Meta(t.Context(), otherForms(t, c)[0], api.MetaOptions{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("client, non-canonical cid: %v is not store.ErrNotFound", err)
	}
	// Writes still refuse the same cid with 400 bad_cid (claims.md).
	if res := e.post(e.text(otherForms(t, c)[0], "title", "Hello", e.ts(1))); res.Rejected != 1 || res.Results[0].Error != "bad_cid" {
		t.Errorf("write of a non-canonical cid: %+v", res)
	}
	// /api/file/{cid}/info is 200 even when absent (http-api.md): another
	// form of a held cid answers as the canonical form does (never a false
	// exists:false); another form of an unknown cid is absent.
	var want api.FileInfo
	e.get("/api/file/"+c+"/info").decode(t, &want)
	if !want.Exists {
		t.Fatalf("info of the canonical form: %+v", want)
	}
	for _, form := range otherForms(t, c) {
		var got api.FileInfo
		e.get("/api/file/"+form+"/info").decode(t, &got)
		if !got.Exists || got.FilePath != want.FilePath || got.Size == nil || *got.Size != *want.Size {
			t.Errorf("info of %s: %+v, want %+v", form, got, want)
		}
	}
	for _, form := range otherForms(t, cidC) {
		if a := e.get("/api/file/" + form + "/info"); a.status != 200 || strings.TrimSpace(string(a.body)) != `{"exists":false}` {
			t.Errorf("info of %s (unknown): %d %s", form, a.status, a.body)
		}
	}

	// The canonical form answers on every route.
	for r := range routes {
		if a := e.get(strings.Replace(r, "%s", c, 1)); a.status != http.StatusOK {
			t.Errorf("%s: %d %s", r, a.status, a.body)
		}
	}

	// Not a cid at all: no record can have it, 404 as upstream (and
	// exists:false on the info route, which answers 200 for the absent).
	for _, garbage := range []string{"notacid", "Qm", "bafy", "01M8NMQW7WFACBMYJH8BWC5P7", "8ZZZZZZZZZZZZZZZZZZZZZZZZZ"} {
		e.get("/api/meta/"+garbage).wantError(t, 404, "unknown_cid")
		e.get("/api/meta/"+garbage+"?remote=1").wantError(t, 404, "unknown_cid")
		e.get("/file/"+garbage).wantError(t, 404, "unknown_cid")
		e.get("/meta/"+garbage).wantError(t, 404, "unknown_root")
		e.get("/meta/"+garbage+"/title").wantError(t, 404, "unknown_root")
		e.get("/api/metadata/"+garbage).wantError(t, 404, "unknown_root")
		a := e.get("/api/file/" + garbage + "/info")
		if a.status != 200 || strings.TrimSpace(string(a.body)) != `{"exists":false}` {
			t.Errorf("info of %s: %d %s", garbage, a.status, a.body)
		}
	}
	if e.node.remotes != 1 { // only the canonical ?remote=1 reached the node
		t.Errorf("%d RemoteRecord calls, want 1", e.node.remotes)
	}
}

// rids are Crockford base32, which reads either case: a lower-case rid (as
// search finds it) names the record, answered with the canonical rid.
func TestReadRoutes_LowerCaseRID(t *testing.T) {
	e := newSeeded(t)
	low := strings.ToLower(e.rid)
	for _, p := range []string{"/meta/" + low, "/api/metadata/" + low} {
		var r api.RecordResponse
		e.get(p).decode(t, &r)
		if r.HashID != e.rid || r.Metadata["title"] != "Inception" {
			t.Errorf("%s: %+v", p, r)
		}
	}
	if a := e.get("/meta/" + low + "/title"); a.status != 200 || string(a.body) != "Inception" {
		t.Errorf("field by lower-case rid: %d %s", a.status, a.body)
	}
	var g api.GroupClaimsResponse
	e.get("/api/metadata/"+low+"/claims").decode(t, &g)
	if g.RID != e.rid || len(g.Claims) == 0 {
		t.Errorf("claims by lower-case rid: %+v", g)
	}
	var s api.SearchResponse
	e.sendJSON(http.MethodPost, "/api/metadata/search", map[string]string{"hashId": low}).decode(t, &s)
	if s.Count != 1 || s.Results[0].HashID != e.rid {
		t.Errorf("search by lower-case hashId: %+v", s)
	}
}

// GET /api/meta/{rid}: the spec's cid field holds a cid, never the rid:
// the record's canonical cid.
func TestMeta_ByRID(t *testing.T) {
	e := newSeeded(t)
	for _, h := range []string{e.rid, strings.ToLower(e.rid)} {
		var m api.MetaResponse
		e.get("/api/meta/"+h).decode(t, &m)
		if m.CID != cidA || m.RID != e.rid || m.CanonicalCID != cidA || m.Metadata["title"] != "Inception" {
			t.Errorf("by rid %s: %+v", h, m)
		}
	}
	e.get("/api/meta/7ZZZZZZZZZZZZZZZZZZZZZZZZZ").wantError(t, 404, "unknown_cid")
	// A rid is local: ?remote=1 never asks the swarm for one.
	e.get("/api/meta/7ZZZZZZZZZZZZZZZZZZZZZZZZZ?remote=1").wantError(t, 404, "unknown_cid")
	var m api.MetaResponse
	e.get("/api/meta/"+e.rid+"?remote=1").decode(t, &m)
	if m.RID != e.rid || e.node.remotes != 0 {
		t.Errorf("remote by rid: %+v, %d RemoteRecord calls", m, e.node.remotes)
	}
}

// ?uid= on the claims routes is checked like ?as=: a uid that cannot exist
// is a 400, not an empty list.
func TestClaims_BadUIDFilter(t *testing.T) {
	e := newSeeded(t)
	e.get("/api/meta/"+cidA+"/claims?uid=bogus").wantError(t, 400, "bad_uid")
	e.get("/api/metadata/"+e.rid+"/claims?uid=zzz").wantError(t, 400, "bad_uid")
}
