package api_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/store"
)

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

// With legacy-writes: refuse, every legacy write route answers 410 gone,
// with or without a trailing slash, and never a redirect (POST
// /meta/{h}/_add/ redirected to itself).
func TestGoneRoutes(t *testing.T) {
	e := newEnv(t)
	for _, r := range []struct{ method, path string }{
		{"PUT", "/meta/" + cidA}, {"PATCH", "/meta/" + cidA}, {"DELETE", "/meta/" + cidA},
		{"PUT", "/meta/" + cidA + "/title"}, {"DELETE", "/meta/" + cidA + "/title"},
		{"PUT", "/meta/" + cidA + "/cast/0/name"},
		{"POST", "/meta/" + cidA + "/_add/tags"}, {"POST", "/meta/" + cidA + "/_add/genres/x"},
		{"POST", "/meta/" + cidA + "/_add"},
		{"PUT", "/api/metadata/" + cidA}, {"DELETE", "/api/metadata/" + cidA},
		{"PUT", "/api/metadata/" + cidA + "/property"},
		{"POST", "/api/metadata/batch"},
	} {
		for _, p := range []string{r.path, r.path + "/"} {
			for _, ct := range []string{"", "application/json", "text/plain"} {
				a := e.rawReq(r.method, p, "", `{"title":"x"}`, "Content-Type", ct)
				if a.status/100 == 3 {
					t.Errorf("%s %s: %d to %q", r.method, p, a.status, a.header.Get("Location"))
					continue
				}
				a.wantError(t, http.StatusGone, "gone")
				if !strings.Contains(string(a.body), "POST /api/claims") {
					t.Errorf("%s %s: %s does not point at POST /api/claims", r.method, p, a.body)
				}
			}
		}
	}
}

// No route answers a redirect, whatever the method and trailing slash.
func TestNoRedirects(t *testing.T) {
	e := newEnv(t)
	paths := []string{"/api/claims", "/api/files/register", "/api/kv/value", "/api/metadata/clear",
		"/meta", "/meta/" + cidA, "/meta/" + cidA + "/title", "/meta/" + cidA + "/_add", "/meta/" + cidA + "/_add/x",
		"/api/metadata/" + cidA, "/api/metadata/" + cidA + "/property", "/api/metadata/batch", "/api/metadata/hash-ids",
		"/api/metadata/list", "/api/metadata/search", "/api/meta/" + cidA, "/api/meta/" + cidA + "/claims",
		"/api/metadata/" + cidA + "/claims", "/api/merge", "/api/files/tuples", "/api/file/" + cidA + "/info",
		"/file/" + cidA, "/api/schema", "/api/stats", "/health", "/urls", "/api/swarm/status", "/api/swarm/peers",
		"/api/swarm/invite", "/api/trust", "/api/trust/zX", "/metrics", "/api", "/api/meta", "/file", "/"}
	for _, p := range paths {
		for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
			for _, q := range []string{p, p + "/"} {
				if a := e.rawReq(m, q, "", "{}", "Content-Type", "application/json"); a.status/100 == 3 {
					t.Errorf("%s %s: %d to %q", m, q, a.status, a.header.Get("Location"))
				}
			}
		}
	}
}

func TestUnknownRouteAndMethod(t *testing.T) {
	e := newEnv(t)
	e.get("/nope").wantError(t, 404, "unknown_root")
	a := e.do(http.MethodPost, "/api/meta/"+cidA, nil)
	a.wantError(t, 405, "method_not_allowed")
	if allow := a.header.Values("Allow"); !slices.Contains(allow, "GET") {
		t.Errorf("Allow %v", allow)
	}
	// /meta is read-only: a write to it is a 405 that allows only GET (not
	// a redirect to /meta/, not an Allow naming the removed write routes).
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		a := e.do(m, "/meta", nil)
		a.wantError(t, 405, "method_not_allowed")
		if allow := a.header.Values("Allow"); !slices.Equal(allow, []string{"GET"}) {
			t.Errorf("%s /meta: Allow %v, want [GET]", m, allow)
		}
	}
}

func TestKV(t *testing.T) {
	e := newEnv(t)
	a := e.sendJSON(http.MethodPut, "/api/kv/value", map[string]any{"key": "sorter:cursor", "value": "42"})
	var v api.KVValue
	a.decode(t, &v)
	if v.Key != "sorter:cursor" || v.Value != "42" || !v.Exists {
		t.Errorf("put: %+v", v)
	}
	a = e.get("/api/kv/value?key=sorter:cursor")
	wantKeys(t, a.body, "key", "type", "value", "exists")
	a.decode(t, &v)
	if v.Value != "42" || !v.Exists {
		t.Errorf("get: %+v", v)
	}
	var d api.KVDeleted
	e.do(http.MethodDelete, "/api/kv/value?key=sorter:cursor", nil).decode(t, &d)
	if !d.Deleted {
		t.Errorf("delete: %+v", d)
	}
	e.get("/api/kv/value?key=sorter:cursor").decode(t, &v)
	if v.Exists || v.Value != "" {
		t.Errorf("after delete: %+v", v)
	}
	e.do(http.MethodDelete, "/api/kv/value?key=sorter:cursor", nil).decode(t, &d)
	if d.Deleted {
		t.Errorf("second delete: %+v", d)
	}

	// Reserved prefixes name the node's own rows: refused for every verb.
	for _, k := range []string{"file:x", "cid:x", "idx:x", "ev:x", "evhwm:x", "meta:x"} {
		e.sendJSON(http.MethodPut, "/api/kv/value", map[string]any{"key": k, "value": "v"}).wantError(t, 400, "schema_violation")
		e.get("/api/kv/value?key="+k).wantError(t, 400, "schema_violation")
		e.do(http.MethodDelete, "/api/kv/value?key="+k, nil).wantError(t, 400, "schema_violation")
	}
	e.sendJSON(http.MethodPut, "/api/kv/value", map[string]any{"key": "", "value": "v"}).wantError(t, 400, "schema_violation")
	e.sendJSON(http.MethodPut, "/api/kv/value", map[string]any{"key": "k", "value": 5}).wantError(t, 400, "schema_violation")
	e.sendJSON(http.MethodPut, "/api/kv/value", map[string]any{"key": "k"}).wantError(t, 400, "schema_violation")
	e.get("/api/kv/value").wantError(t, 400, "schema_violation")
	e.do(http.MethodDelete, "/api/kv/value", nil).wantError(t, 400, "schema_violation")
}

func TestClear(t *testing.T) {
	e := newSeeded(t)
	a := e.do(http.MethodPost, "/api/metadata/clear", nil)
	wantKeys(t, a.body, "status", "message", "deletedCount")
	var c api.ClearResponse
	a.decode(t, &c)
	if c.Status != "ok" || c.DeletedCount != 5 {
		t.Errorf("clear: %+v", c)
	}
	e.get("/api/meta/"+cidA).wantError(t, 404, "unknown_cid")
}

func TestTrustRoutes(t *testing.T) {
	e := newEnv(t, withStore(func(c *store.Config) { c.Trust = store.TrustList }))
	uid := e.signer.UID()
	a := e.do(http.MethodPut, "/api/trust/"+uid, nil)
	wantKeys(t, a.body, "uid", "trusted")
	var tc api.TrustChange
	a.decode(t, &tc)
	if tc.UID != uid || !tc.Trusted {
		t.Errorf("trust: %+v", tc)
	}
	tl, err := e.c.Trust(t.Context())
	if err != nil || tl.Mode != "list" || !slices.ContainsFunc(tl.Trusted, func(x store.TrustEntry) bool { return x.UID == uid }) {
		t.Errorf("trust list: %+v %v", tl, err)
	}
	if err := e.c.RemoveTrust(t.Context(), uid); err != nil {
		t.Fatal(err)
	}
	tl, _ = e.c.Trust(t.Context())
	if slices.ContainsFunc(tl.Trusted, func(x store.TrustEntry) bool { return x.UID == uid }) {
		t.Errorf("still trusted after DELETE: %+v", tl)
	}
	e.do(http.MethodDelete, "/api/trust/"+uid, nil).decode(t, &tc)
	if tc.Trusted {
		t.Errorf("distrust: %+v", tc)
	}

	for _, bad := range []string{"zNope", "notz", strings.Repeat("z", 200)} {
		e.do(http.MethodPut, "/api/trust/"+bad, nil).wantError(t, 400, "bad_uid")
		e.do(http.MethodDelete, "/api/trust/"+bad, nil).wantError(t, 400, "bad_uid")
	}
	if err := e.c.AddTrust(t.Context(), "zNope"); !errors.Is(err, store.ErrBadUID) {
		t.Errorf("client AddTrust(bad): %v", err)
	}
	a = e.do(http.MethodPut, "/api/trust/"+uid, io.LimitReader(zeros{}, 2<<20))
	a.wantError(t, 413, "too_large")
	a = e.get("/api/trust")
	wantKeys(t, a.body, "mode", "trusted", "distrusted")
}

func TestSwarmRoutes(t *testing.T) {
	e := newEnv(t)
	a := e.get("/api/swarm/status")
	wantKeys(t, a.body, "peerId", "uid", "addrs", "swarm", "private", "peers", "trust", "replicate", "dht", "sync", "errors")
	st, err := e.c.SwarmStatus(t.Context())
	if err != nil || st.PeerID != "12D3KooWtest" || st.Addrs == nil {
		t.Errorf("status: %+v %v", st, err)
	}
	a = e.get("/api/swarm/peers")
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(a.body, &raw); a.status != 200 || err != nil || len(raw) != 1 {
		t.Fatalf("peers: %d %s", a.status, a.body)
	}
	for _, k := range []string{"peerId", "addrs", "connectedSince", "latencyMs", "lastSync", "claimsSent", "claimsReceived"} {
		if _, ok := raw[0][k]; !ok {
			t.Errorf("peer lacks %q: %s", k, a.body)
		}
	}
	if string(raw[0]["lastSync"]) != "null" {
		t.Errorf("lastSync of a peer never synced = %s, want null", raw[0]["lastSync"])
	}
	peers, err := e.c.SwarmPeers(t.Context())
	if err != nil || len(peers) != 1 || peers[0].LastSync != nil {
		t.Errorf("client peers: %+v %v", peers, err)
	}

	// Invites: an empty body takes the node's default lifetime.
	a = e.do(http.MethodPost, "/api/swarm/invite", nil)
	wantKeys(t, a.body, "code", "expires", "uid", "swarm", "private", "addrs")
	inv, err := e.c.Invite(t.Context(), time.Hour)
	if err != nil || inv.Code != "mn1:test" || !inv.Expires.Equal(time.Unix(3600, 0)) || inv.Addrs == nil {
		t.Errorf("invite: %+v %v", inv, err)
	}
	for _, bad := range []string{`{"ttl":"soon"}`, `{"ttl":"-1h"}`, `{"ttl":0}`} {
		e.do(http.MethodPost, "/api/swarm/invite", strings.NewReader(bad)).wantError(t, 400, "schema_violation")
	}
	for _, b := range garbageBodies[1:] { // "" is a valid (empty) body here
		e.do(http.MethodPost, "/api/swarm/invite", strings.NewReader(b)).wantError(t, 400, "schema_violation")
	}
	e.do(http.MethodPost, "/api/swarm/invite", io.LimitReader(zeros{}, 2<<20)).wantError(t, 413, "too_large")
	if _, err := e.c.Invite(t.Context(), 100*time.Hour); err == nil {
		t.Error("the node's refusal did not reach the client")
	}
}

// TestBadBodies sends garbage and oversized bodies to every route that reads one.
func TestBadBodies(t *testing.T) {
	e := newEnv(t)
	for _, r := range []struct {
		method, path string
		limit        int64
		optional     bool // an empty body is the defaults
	}{
		{"POST", "/api/claims", api.MaxClaimsBody, false},
		{"POST", "/api/merge", api.MaxClaimsBody, false},
		{"POST", "/api/metadata/search", 1 << 20, false},
		{"POST", "/api/files/register", 1 << 20, false},
		{"PUT", "/api/kv/value", 1 << 20, false},
		{"POST", "/api/swarm/invite", 1 << 20, true},
	} {
		for _, b := range garbageBodies {
			if b == "" && r.optional {
				continue
			}
			e.do(r.method, r.path, strings.NewReader(b)).wantError(t, 400, "schema_violation")
		}
		huge := func() io.Reader {
			return io.MultiReader(strings.NewReader(`{"x":"`), io.LimitReader(zeros{}, r.limit), strings.NewReader(`"}`))
		}
		b, _ := io.ReadAll(huge())
		e.do(r.method, r.path, bytes.NewReader(b)).wantError(t, 413, "too_large")
		e.do(r.method, r.path, onlyReader{huge()}).wantError(t, 413, "too_large")
	}
	if h, err := e.c.Health(t.Context()); err != nil || h.Status != "ok" {
		t.Errorf("after bad bodies: %v %v", h, err)
	}
}
