package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/store"
)

// rawReq sends one request with a body, the given headers and Host (""
// keeps the URL's), follows no redirect, and reads the answer.
func (e *env) rawReq(method, path, host, body string, hdr ...string) answer {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// claimsBody is a POST /api/claims body holding c.
func claimsBody(t testing.TB, c store.Claim) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"claims": []any{c.ToJSON(false)}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// testToken is the API token of the envs that have one.
const testToken = "test-token-0123456789abcdefghijklmnopqrstuv"

func withToken(c *api.Config) { c.Token, c.TokenFile = testToken, "/data/api.token" }

// bearer is the header pair carrying testToken.
var bearer = []string{"Authorization", "Bearer " + testToken}

// writeRoutes are the routes a foreign page must never reach.
func writeRoutes(t *testing.T, e *env, victim *store.Signer) []struct{ method, path, ctype, body string } {
	return []struct{ method, path, ctype, body string }{
		{"POST", "/api/claims", "application/json", claimsBody(t, e.text(cidB, "title", "PWNED", e.ts(1)))},
		{"POST", "/api/metadata/clear", "", ""},
		{"PUT", "/api/trust/" + victim.UID(), "", ""},
		{"DELETE", "/api/trust/" + e.signer.UID(), "", ""},
		{"PUT", "/api/kv/value", "application/json", `{"key":"sorter:cursor","value":"x"}`},
		{"DELETE", "/api/kv/value?key=sorter:cursor", "", ""},
		{"POST", "/api/files/register", "application/json", `{"path":"plugin/x.bin"}`},
		{"POST", "/api/swarm/invite", "application/json", `{}`},
	}
}

// A page on another origin can neither write nor read: every request it
// makes carries its Origin (or Sec-Fetch-Site: cross-site) and is refused
// with 403 before anything runs, with no CORS header to let it read the
// refusal either. Pages on loopback's other ports are other origins too.
func TestBrowser_ForeignOriginRefused(t *testing.T) {
	e := newEnv(t, withAPI(withToken))
	kept := e.text(cidA, "title", "secret", e.ts(0))
	if r := e.post(kept); r.Accepted != 1 {
		t.Fatalf("seed: %+v", r)
	}
	e.sendJSON("PUT", "/api/kv/value", map[string]any{"key": "sorter:cursor", "value": "secret"})
	victim := mustSigner(t)
	port := portOf(e.url)
	foreign := []string{"http://evil.example", "https://evil.example:" + port, "null", "", "file://",
		"http://127.0.0.1.evil.example", "http://localhost:3000", "http://127.0.0.1", "http://[::1]:8080", "http://127.0.0.1:" + port + "/x"}
	reads := []struct{ method, path, body string }{
		{"GET", "/api/kv/value?key=sorter:cursor", ""},
		{"GET", "/api/meta/" + cidA, ""},
		{"GET", "/api/files/tuples", ""},
		{"GET", "/api/metadata/list", ""},
		{"GET", "/api/events/meta", ""},
		{"POST", "/api/metadata/search", `{"query":"secret"}`},
		{"POST", "/api/merge", `{"claims":[]}`},
		{"GET", "/api/token", ""},
	}
	for _, origin := range foreign {
		for _, r := range writeRoutes(t, e, victim) {
			// With the token too: a page on another origin is not served.
			for _, auth := range [][]string{nil, bearer} {
				a := e.rawReq(r.method, r.path, "", r.body, append([]string{"Origin", origin, "Content-Type", r.ctype}, auth...)...)
				a.wantError(t, http.StatusForbidden, api.SlugForbiddenOrigin)
			}
		}
		for _, r := range reads {
			a := e.rawReq(r.method, r.path, "", r.body, "Origin", origin, "Content-Type", "text/plain")
			a.wantError(t, http.StatusForbidden, api.SlugForbiddenOrigin)
			if bytes.Contains(a.body, []byte("secret")) || a.header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("%s %s from %q: %v %s", r.method, r.path, origin, a.header, a.body)
			}
		}
	}
	// No Origin, but the browser says who asks: a cross-site page's
	// no-cors read (img, script) or a framed navigation is refused; a
	// link the user follows to a page of the node is served.
	for _, site := range []string{"cross-site", "same-site"} {
		for _, r := range reads[:4] {
			for _, mode := range [][]string{{"Sec-Fetch-Mode", "no-cors", "Sec-Fetch-Dest", "script"}, {"Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "iframe"}} {
				e.rawReq(r.method, r.path, "", "", append([]string{"Sec-Fetch-Site", site}, mode...)...).wantError(t, 403, api.SlugForbiddenOrigin)
			}
		}
		if a := e.rawReq("GET", "/health", "", "", "Sec-Fetch-Site", site, "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"); a.status != 200 {
			t.Errorf("a followed link (%s): %d %s", site, a.status, a.body)
		}
	}
	if _, err := e.c.Meta(context.Background(), cidB, api.MetaOptions{}); !isNotFound(err) {
		t.Errorf("a foreign page's claim was stored: %v", err)
	}
	if m, err := e.c.Meta(context.Background(), cidA, api.MetaOptions{}); err != nil || m.Metadata["title"] != "secret" {
		t.Errorf("a foreign page wiped or changed the library: %+v %v", m, err)
	}
	tl, err := e.c.Trust(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range tl.Trusted {
		if tr.UID == victim.UID() {
			t.Errorf("a foreign page added %s to the trust list", victim.UID())
		}
	}
}

// A page the node serves (its own origin: the address or name the request
// went to, or an allowed host's) reads freely and writes with the token;
// without it every write is 401, whatever the address.
func TestBrowser_OwnOriginWritesWithToken(t *testing.T) {
	e := newEnv(t, withAPI(withToken))
	host := strings.TrimPrefix(e.url, "http://")
	for i, own := range []string{"http://" + host, "HTTP://" + strings.ToUpper(host)} {
		for _, r := range writeRoutes(t, e, mustSigner(t))[:1] {
			e.rawReq(r.method, r.path, "", r.body, "Origin", own, "Content-Type", r.ctype, "Sec-Fetch-Site", "same-origin").
				wantError(t, http.StatusUnauthorized, api.SlugUnauthorized)
		}
		a := e.rawReq("POST", "/api/claims", "", claimsBody(t, e.text(cidN(i), "title", "ok", e.ts(2))),
			"Origin", own, "Content-Type", "application/json", "Sec-Fetch-Site", "same-origin", bearer[0], bearer[1])
		var res api.ClaimsResponse
		if a.decode(t, &res); res.Accepted != 1 {
			t.Errorf("own origin %s with the token: %s", own, a.body)
		}
		// Reads and the POSTs that only read need no token.
		for _, r := range []struct{ method, path, body string }{{"POST", "/api/metadata/search", `{"query":"ok"}`}, {"POST", "/api/merge", `{"claims":[]}`}} {
			if a := e.rawReq(r.method, r.path, "", r.body, "Origin", own, "Content-Type", "application/json", "Sec-Fetch-Site", "same-origin"); a.status != 200 {
				t.Errorf("%s %s from the node's own page: %d %s", r.method, r.path, a.status, a.body)
			}
		}
	}
	if a := e.rawReq("GET", "/api/meta/"+cidN(0), "", "", "Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "cors"); a.status != 200 {
		t.Errorf("same-origin read: %d %s", a.status, a.body)
	}
	// The removed routes change nothing: 410 to a page as to anyone.
	e.rawReq("PUT", "/meta/"+cidA+"/title", "", "x", "Origin", "http://"+host).wantError(t, http.StatusGone, "gone")
	// Every answer keeps what the node serves from running as its page.
	a := e.get("/health")
	for k, v := range map[string]string{"Content-Security-Policy": "sandbox", "X-Content-Type-Options": "nosniff", "Cross-Origin-Resource-Policy": "same-origin"} {
		if a.header.Get(k) != v {
			t.Errorf("%s: %q, want %q", k, a.header.Get(k), v)
		}
	}
}

// The types a page may send without a preflight are refused on a
// browser's writes (Origin or Sec-Fetch-* present, token given): 415,
// nothing stored. application/json with parameters, or no type at all, are
// accepted; and a local script (no browser headers) may post JSON under
// any type, as Python's urllib (form), Node's fetch of a string
// (text/plain) and curl -d do.
func TestBrowserWrites_ContentType(t *testing.T) {
	e := newEnv(t, withAPI(withToken))
	own := "http://" + strings.TrimPrefix(e.url, "http://")
	for i, ct := range []string{"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
		"multipart/form-data; boundary=x", "application/jsonx", "json", ";;"} {
		for j, marker := range []string{"Origin", "Sec-Fetch-Site"} {
			n := 100 + 2*i + j
			c := e.text(cidN(n), "title", "x", e.ts(0))
			value := map[string]string{"Origin": own, "Sec-Fetch-Site": "same-origin"}[marker]
			a := e.rawReq("POST", "/api/claims", "", claimsBody(t, c), "Content-Type", ct, marker, value, bearer[0], bearer[1])
			a.wantError(t, http.StatusUnsupportedMediaType, api.SlugUnsupportedMediaType)
			if _, err := e.c.Meta(context.Background(), cidN(n), api.MetaOptions{}); !isNotFound(err) {
				t.Errorf("Content-Type %q with %s: the claim was stored: %v", ct, marker, err)
			}
		}
	}
	e.rawReq("PUT", "/api/kv/value", "", `{"key":"a","value":"b"}`, "Content-Type", "application/x-www-form-urlencoded",
		"Sec-Fetch-Mode", "no-cors", bearer[0], bearer[1]).wantError(t, 415, api.SlugUnsupportedMediaType)
	for i, ct := range []string{"application/x-www-form-urlencoded", "text/plain;charset=UTF-8"} {
		a := e.rawReq("POST", "/api/claims", "", claimsBody(t, e.text(cidN(400+i), "title", "x", e.ts(0))), "Content-Type", ct)
		var res api.ClaimsResponse
		if a.decode(t, &res); res.Accepted != 1 {
			t.Errorf("a local script's JSON as %q: %s", ct, a.body)
		}
	}
	for i, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
		a := e.rawReq("POST", "/api/claims", "", claimsBody(t, e.text(cidN(200+i), "title", "x", e.ts(0))), "Content-Type", ct,
			"Origin", own, bearer[0], bearer[1])
		var res api.ClaimsResponse
		if a.decode(t, &res); res.Accepted != 1 {
			t.Errorf("Content-Type %q: %s", ct, a.body)
		}
	}
	a := e.rawReq("POST", "/api/claims", "", claimsBody(t, e.text(cidN(300), "title", "x", e.ts(0)))) // Go's client names no type
	var res api.ClaimsResponse
	if a.decode(t, &res); res.Accepted != 1 {
		t.Errorf("no Content-Type: %s", a.body)
	}
}

// DNS rebinding: on a loopback listener every route refuses a Host that is
// not localhost or a loopback literal, before reading anything.
func TestBrowserReads_HostOnLoopback(t *testing.T) {
	e := newEnv(t)
	e.post(e.text(cidA, "title", "secret", e.ts(0)))
	port := portOf(e.url)
	for _, host := range []string{"evil.example:" + port, "evil.example", "localhost.evil.example:" + port,
		"127.0.0.1.nip.io:" + port, "localhostx", "localhost.evil."} {
		for _, p := range []string{"/api/files/tuples", "/api/meta/" + cidA, "/api/kv/value?key=a", "/api/events/meta", "/nope"} {
			a := e.rawReq("GET", p, host, "")
			a.wantError(t, http.StatusForbidden, api.SlugForbiddenHost)
			if bytes.Contains(a.body, []byte("secret")) {
				t.Errorf("Host %s %s leaked: %s", host, p, a.body)
			}
		}
		e.rawReq("OPTIONS", "/api/claims", host, "").wantError(t, http.StatusForbidden, api.SlugForbiddenHost)
	}
	// Loopback names, and any address: a page is served from an address
	// only by whoever holds it, so no DNS answer can make one rebind.
	for _, host := range []string{"localhost:" + port, "localhost", "LOCALHOST:" + port, "localhost.:" + port, "127.0.0.1:" + port,
		"127.1.2.3", "[::1]:" + port, "[::1]", "10.0.0.1:" + port, "[::2]:" + port, "0.0.0.0:" + port} {
		if a := e.rawReq("GET", "/api/meta/"+cidA, host, ""); a.status != 200 {
			t.Errorf("Host %s: %d %s", host, a.status, a.body)
		}
	}
}

// A server behind a proxy that passes the browser's Host names it in
// AllowedHosts; a server on a non-loopback address (a container network)
// checks Host just the same (a port published on the host's loopback was
// open to rebinding reads), answers its machine's own name, and "*" turns
// the check off. The token passes the check: a page never holds it.
func TestBrowser_AllowedHostsAndNonLoopback(t *testing.T) {
	e := newEnv(t, withAPI(func(c *api.Config) { c.AllowedHosts = []string{"Media.Example.org"}; withToken(c) }))
	e.post(e.text(cidA, "title", "x", e.ts(0)))
	for _, host := range []string{"media.example.org", "MEDIA.example.org.:443"} {
		if a := e.rawReq("GET", "/api/meta/"+cidA, host, ""); a.status != 200 {
			t.Errorf("allowed host %s: %d %s", host, a.status, a.body)
		}
	}
	e.rawReq("GET", "/api/meta/"+cidA, "other.example.org", "").wantError(t, 403, api.SlugForbiddenHost)
	if a := e.rawReq("GET", "/api/meta/"+cidA, "other.example.org", "", bearer...); a.status != 200 {
		t.Errorf("a script with the token by another name: %d %s", a.status, a.body)
	}
	// The proxy's page writes with the token, whatever Host the proxy sends.
	for i, host := range []string{"media.example.org", strings.TrimPrefix(e.url, "http://")} {
		a := e.rawReq("POST", "/api/claims", host, claimsBody(t, e.text(cidN(i), "title", "y", e.ts(1))),
			"Origin", "https://media.example.org", "Content-Type", "application/json", bearer[0], bearer[1])
		if a.status != 200 {
			t.Errorf("write from the allowed host's page (Host %s): %d %s", host, a.status, a.body)
		}
	}

	// Listening on 0.0.0.0 (as the listener reports; the socket itself is
	// on loopback, tests touch nothing else).
	wildEnv := func(allowed ...string) *env {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		wild := &addrListener{Listener: ln, addr: &net.TCPAddr{IP: net.IPv4zero, Port: ln.Addr().(*net.TCPAddr).Port}}
		c := newEnv(t, withAPI(func(c *api.Config) { c.Listener, c.AllowedHosts = wild, allowed; withToken(c) }))
		c.url = "http://" + ln.Addr().String()
		c.c = api.NewClient(c.url)
		return c
	}
	c := wildEnv()
	c.post(c.text(cidA, "title", "x", c.ts(0)))
	c.rawReq("GET", "/api/meta/"+cidA, "rebind.example:9000", "").wantError(t, 403, api.SlugForbiddenHost)
	a := c.rawReq("GET", "/api/meta/"+cidA, "metanode:9000", "")
	a.wantError(t, 403, api.SlugForbiddenHost)
	if !strings.Contains(string(a.body), `--http-allowed-hosts \"metanode\"`) {
		t.Errorf("the refusal does not say how to allow the name: %s", a.body)
	}
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{hostname, hostname + ":9000", strings.ToUpper(hostname) + ".local:9000", "172.17.0.2:9000", "localhost:9000"} {
		if a := c.rawReq("GET", "/api/meta/"+cidA, host, ""); a.status != 200 && !strings.EqualFold(hostname, "localhost") {
			t.Errorf("the machine's own name or an address %s: %d %s", host, a.status, a.body)
		}
	}
	// A page on the name the request went to is what a rebinding page
	// presents: refused unless the name is allowed. A page on the very
	// address is the same origin for real.
	n := wildEnv("metanode")
	n.post(n.text(cidA, "title", "x", n.ts(0)))
	if a := n.rawReq("GET", "/api/meta/"+cidA, "metanode:9000", ""); a.status != 200 {
		t.Errorf("container's allowed name: %d %s", a.status, a.body)
	}
	a = n.rawReq("POST", "/api/claims", "172.17.0.2:9000", claimsBody(t, n.text(cidB, "title", "y", n.ts(1))),
		"Origin", "http://172.17.0.2:9000", "Content-Type", "application/json", bearer[0], bearer[1])
	if a.status != 200 {
		t.Errorf("same-origin write from the container's address: %d %s", a.status, a.body)
	}
	n.rawReq("POST", "/api/metadata/clear", "metanode:9000", "", "Origin", "http://evil.example", bearer[0], bearer[1]).
		wantError(t, 403, api.SlugForbiddenOrigin)

	// "*": every Host is answered, and a page on the name the request went
	// to is still foreign.
	o := wildEnv(api.AnyHost)
	o.post(o.text(cidA, "title", "x", o.ts(0)))
	if a := o.rawReq("GET", "/api/meta/"+cidA, "rebind.example:9000", ""); a.status != 200 {
		t.Errorf("any host: %d %s", a.status, a.body)
	}
	o.rawReq("POST", "/api/metadata/clear", "rebind.example:9000", "", "Origin", "http://rebind.example:9000", bearer[0], bearer[1]).
		wantError(t, 403, api.SlugForbiddenOrigin)
	o.rawReq("GET", "/api/token", "rebind.example:9000", "", "Sec-Fetch-Site", "same-origin").
		wantError(t, 403, api.SlugForbiddenOrigin)
}

type addrListener struct {
	net.Listener
	addr net.Addr
}

func (l *addrListener) Addr() net.Addr { return l.addr }

func portOf(u string) string {
	pu, err := url.Parse(u)
	if err != nil {
		panic(err)
	}
	return pu.Port()
}

func mustSigner(t testing.TB) *store.Signer {
	t.Helper()
	s, err := store.GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
