package api_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metanode/metanode/api"
)

// A request relayed by a proxy, or from an address that is not local, is
// served only GET /health and preflights without the token; with it, as
// a local caller. A wrong token is refused even on loopback. (From real
// non-loopback addresses: cmd/metanode's TestE2E_ExposedAPI.)
func TestAccess_NonLocalNeedsToken(t *testing.T) {
	e := newEnv(t, withAPI(withToken))
	e.post(e.text(cidA, "title", "secret", e.ts(0)))
	victim := mustSigner(t)
	relayed := [][]string{{"X-Forwarded-For", "127.0.0.1"}, {"Forwarded", "for=192.0.2.1"}, {"X-Real-IP", "::1"}}
	reads := []string{"/api/meta/" + cidA, "/api/kv/value?key=a", "/api/files/tuples", "/metrics", "/api/trust", "/urls", "/api/token", "/nope"}
	for _, via := range relayed {
		for _, p := range reads {
			a := e.rawReq("GET", p, "", "", via...)
			a.wantError(t, http.StatusUnauthorized, api.SlugUnauthorized)
			if !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") || strings.Contains(string(a.body), "secret") {
				t.Errorf("GET %s via %v: %v %s", p, via, a.header, a.body)
			}
		}
		for _, r := range writeRoutes(t, e, victim) {
			e.rawReq(r.method, r.path, "", r.body, append([]string{"Content-Type", r.ctype}, via...)...).wantError(t, 401, api.SlugUnauthorized)
		}
		if a := e.rawReq("GET", "/health", "", "", via...); a.status != 200 {
			t.Errorf("health via %v: %d %s", via, a.status, a.body)
		}
		if a := e.rawReq("OPTIONS", "/api/claims", "", "", via...); a.status != http.StatusNoContent {
			t.Errorf("OPTIONS via %v: %d %s", via, a.status, a.body)
		}
		// The token makes the caller local.
		if a := e.rawReq("GET", "/api/meta/"+cidA, "", "", append(via, bearer...)...); a.status != 200 {
			t.Errorf("with the token via %v: %d %s", via, a.status, a.body)
		}
		a := e.rawReq("PUT", "/api/kv/value", "", `{"key":"k","value":"v"}`, append(via, bearer...)...)
		if a.status != 200 {
			t.Errorf("kv write with the token via %v: %d %s", via, a.status, a.body)
		}
	}
	for _, auth := range []string{"Bearer wrong", "Bearer " + testToken + "x", "bearer  "} {
		a := e.rawReq("GET", "/api/meta/"+cidA, "", "", "Authorization", auth)
		a.wantError(t, 401, api.SlugUnauthorized)
		if !strings.Contains(string(a.body), "/data/api.token") {
			t.Errorf("the refusal does not say where the token is: %s", a.body)
		}
	}
	if a := e.rawReq("GET", "/api/meta/"+cidA, "", "", "Authorization", "bEaReR "+testToken); a.status != 200 {
		t.Errorf("scheme in another case: %d %s", a.status, a.body)
	}
	// Nothing the refused callers sent was stored.
	if _, err := e.c.Meta(context.Background(), cidB, api.MetaOptions{}); !isNotFound(err) {
		t.Errorf("a relayed write was stored: %v", err)
	}
}

// A node whose callers come from a declared network treats them as
// loopback; a listener beyond loopback with neither that nor a token is
// refused at Open, saying what to set.
func TestAccess_ExposedListenerNeedsTokenOrNetwork(t *testing.T) {
	wild := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return &addrListener{Listener: ln, addr: &net.TCPAddr{IP: net.IPv6unspecified, Port: ln.Addr().(*net.TCPAddr).Port}}
	}
	st := newEnv(t).st
	srv := api.NewServer(api.Config{Listener: wild(), Store: st, Node: &testNode{st: st}, Logger: testLogger(t)})
	err := srv.Open(context.Background())
	var ee *api.ExposedError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "local-networks") {
		t.Fatalf("Open beyond loopback with no token or network: %v", err)
	}
	srv.Close()
	srv = api.NewServer(api.Config{Listener: wild(), Store: st, Node: &testNode{st: st}, Logger: testLogger(t),
		LocalNetworks: []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")}})
	if err := srv.Open(context.Background()); err != nil {
		t.Fatalf("Open beyond loopback with a local network: %v", err)
	}
	srv.Close()
}

// The Unix socket: every caller on it is local (it is 0600), it serves
// the same routes, a stale socket file is replaced and a live one refused.
func TestAccess_UnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "api.sock")
	// A stale socket a dead node left.
	stale, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	e := newEnv(t, withAPI(func(c *api.Config) { c.Socket = sock; withToken(c) }))
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %s: %v %v, want mode 0600", sock, fi, err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(mustReq(t, "PUT", "http://localhost/api/kv/value", `{"key":"k","value":"by socket"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("kv write on the socket: %d %s", resp.StatusCode, b)
	}
	if a := e.get("/api/kv/value?key=k"); !strings.Contains(string(a.body), "by socket") {
		t.Errorf("the socket's write: %s", a.body)
	}
	// A second server on the same path: another process answers there.
	srv := api.NewServer(api.Config{Addr: "127.0.0.1:0", Socket: sock, Store: e.st, Node: e.node, Logger: testLogger(t)})
	if err := srv.Open(context.Background()); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Errorf("a second server on a live socket: %v", err)
	}
	srv.Close()
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket file outlived Close: %v", err)
	}
}

func mustReq(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// GET /api/token hands the token to the node's own pages only: a
// browser's same-origin request from a local address on a known name.
func TestAccess_TokenEndpoint(t *testing.T) {
	e := newEnv(t, withAPI(withToken))
	a := e.rawReq("GET", "/api/token", "", "", "Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "cors")
	var tok api.TokenResponse
	if a.decode(t, &tok); tok.Token != testToken || a.header.Get("Cache-Control") != "no-store" {
		t.Errorf("same-origin page: %v %s", a.header, a.body)
	}
	e.rawReq("GET", "/api/token", "", "").wantError(t, 403, api.SlugForbiddenOrigin) // a script reads the file
	e.rawReq("GET", "/api/token", "", "", "Sec-Fetch-Site", "none").wantError(t, 403, api.SlugForbiddenOrigin)
	e.rawReq("GET", "/api/token", "", "", "Sec-Fetch-Site", "cross-site").wantError(t, 403, api.SlugForbiddenOrigin)
	e.rawReq("GET", "/api/token", "", "", "Sec-Fetch-Site", "same-origin", "X-Forwarded-For", "192.0.2.9").wantError(t, 401, api.SlugUnauthorized)
	e.rawReq("GET", "/api/token", "evil.example", "", "Sec-Fetch-Site", "same-origin").wantError(t, 403, api.SlugForbiddenHost)
	// No token, nothing to hand out.
	n := newEnv(t)
	n.rawReq("GET", "/api/token", "", "", "Sec-Fetch-Site", "same-origin").wantError(t, 404, api.SlugUnknownRoot)
}

// CORS is off by default; origins in CORSOrigins are answered with their
// own origin (never *), may read, and write with the token.
func TestCORS(t *testing.T) {
	e := newEnv(t)
	a := e.do(http.MethodOptions, "/api/claims", nil, "Origin", "http://example.org", "Access-Control-Request-Method", "POST")
	a.wantError(t, 403, api.SlugForbiddenOrigin)
	for _, p := range []string{"/health", "/api/meta/" + cidA} {
		if a := e.get(p); a.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("GET %s has CORS: %v", p, a.header)
		}
	}
	dash := "http://dash.lan:8080"
	c := newEnv(t, withAPI(func(c *api.Config) { c.CORSOrigins = []string{dash + "/"}; withToken(c) }))
	c.post(c.text(cidA, "title", "x", c.ts(0)))
	a = c.do(http.MethodOptions, "/api/claims", nil, "Origin", dash, "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Headers", "authorization,content-type")
	if a.status != http.StatusNoContent || a.header.Get("Access-Control-Allow-Origin") != dash || a.header.Get("Vary") != "Origin" ||
		!strings.Contains(a.header.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(a.header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight from an allowed origin: %d %v", a.status, a.header)
	}
	if a := c.do("GET", "/api/meta/"+cidA, nil, "Origin", dash, "Sec-Fetch-Site", "cross-site"); a.status != 200 || a.header.Get("Access-Control-Allow-Origin") != dash {
		t.Errorf("read from an allowed origin: %d %v", a.status, a.header)
	}
	c.do("POST", "/api/metadata/clear", nil, "Origin", dash).wantError(t, 401, api.SlugUnauthorized)
	if a := c.do("PUT", "/api/kv/value", strings.NewReader(`{"key":"k","value":"v"}`), "Origin", dash, "Content-Type", "application/json", bearer[0], bearer[1]); a.status != 200 {
		t.Errorf("write from an allowed origin with the token: %d %s", a.status, a.body)
	}
	c.do("GET", "/api/meta/"+cidA, nil, "Origin", "http://dash.lan:8081").wantError(t, 403, api.SlugForbiddenOrigin)
}
