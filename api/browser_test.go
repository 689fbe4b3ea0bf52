package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/internal/browsertest"
)

// foreignPage is a page on another site than the API: it tries to read
// the kv and the library, to store a claim, clear the library and write
// the kv, by fetch and by a plain form post, and reports what it could.
const foreignPage = `<!doctype html><html><body>
<iframe name="sink"></iframe>
<script>
async function attack(api, claims) {
  const out = {};
  for (const [name, path] of [["kv", "/api/kv/value?key=sorter:cursor"], ["list", "/api/metadata/list"], ["token", "/api/token"]]) {
    try { const r = await fetch(api + path); out[name] = "read " + r.status + " " + await r.text(); }
    catch (e) { out[name] = "blocked"; }
  }
  const sends = [
    ["claims", "/api/claims", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: claims}],
    ["clear", "/api/metadata/clear", {method: "POST", mode: "no-cors"}],
    ["kvput", "/api/kv/value", {method: "PUT", headers: {"Content-Type": "application/json"}, body: '{"key":"sorter:cursor","value":"PWNED"}'}],
  ];
  for (const [name, path, init] of sends) {
    try { const r = await fetch(api + path, init); out[name] = "answered " + r.type + " " + r.status; }
    catch (e) { out[name] = "blocked"; }
  }
  await new Promise((done) => {
    const f = document.createElement("form");
    f.method = "POST"; f.action = api + "/api/metadata/clear"; f.target = "sink";
    document.querySelector("iframe").onload = done;
    document.body.appendChild(f); f.submit();
    setTimeout(done, 5000);
  });
  return JSON.stringify(out);
}
</script></body></html>`

// runPage opens page in headless Chromium and returns what attack(api)
// reported.
func runPage(t *testing.T, page, apiURL, claims string) map[string]string {
	t.Helper()
	bctx := browsertest.Tab(t)
	args, _ := json.Marshal([]string{apiURL, claims})
	if err := chromedp.Do(bctx, chromedp.Navigate(page)); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	out, err := chromedp.Run(bctx, chromedp.Evaluate[string]("attack(..."+string(args)+")", chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	var res map[string]string
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("the page reported %q: %v", out, err)
	}
	return res
}

// A library file is served from the node's own origin: an HTML file in
// the files root, opened in the browser, would be the node's own page and
// could fetch the token. Every answer is CSP sandboxed: its script never
// runs, and the kv is untouched.
func TestBrowser_LibraryFileIsNoPage(t *testing.T) {
	e := newEnv(t, withAPI(withToken))
	e.sendJSON("PUT", "/api/kv/value", map[string]any{"key": "sorter:cursor", "value": "kept"})
	writeFile(t, filepath.Join(e.root, "plugin/evil.html"), `<!doctype html><title>static</title><script>
document.title = "ran";
fetch("/api/token").then(r => r.json()).then(j => fetch("/api/kv/value", {method: "PUT",
  headers: {"Content-Type": "application/json", "Authorization": "Bearer " + j.token},
  body: '{"key":"sorter:cursor","value":"PWNED"}'})).then(r => { document.title = "wrote " + r.status; });
</script>`)
	r, err := e.c.RegisterFile(t.Context(), "plugin/evil.html")
	if err != nil {
		t.Fatal(err)
	}
	bctx := browsertest.Tab(t)
	if err := chromedp.Do(bctx, chromedp.Navigate(e.url+"/file/"+r.CID)); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	title, err := chromedp.Run(bctx, chromedp.Evaluate[string]("document.title"))
	if err != nil {
		t.Fatal(err)
	}
	if title != "static" {
		t.Errorf("the library file's script ran: title %q", title)
	}
	if a := e.get("/api/kv/value?key=sorter:cursor"); !strings.Contains(string(a.body), `"kept"`) {
		t.Errorf("the kv after opening the file: %s", a.body)
	}
}

// A page on another site, opened in a real browser on the node's own
// machine (a loopback caller), can read neither the kv nor the library nor
// the token, and stores, clears and writes nothing, by fetch or by form;
// the server saw the requests and refused them. The same page on an
// origin listed in cors-origins reads (the test can see a read).
func TestBrowser_ForeignPageInChromium(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, foreignPage)
	}))
	defer site.Close()
	// Served from 127.0.0.1, opened as localhost: another site than the
	// API's 127.0.0.1.
	page := strings.Replace(site.URL, "127.0.0.1", "localhost", 1)
	origin := strings.TrimSuffix(page, "/")

	e := newEnv(t, withAPI(withToken))
	e.post(e.text(cidA, "title", "secret title", e.ts(0)))
	e.sendJSON("PUT", "/api/kv/value", map[string]any{"key": "sorter:cursor", "value": "secret"})
	claims := claimsBody(t, e.text(cidB, "title", "PWNED", e.ts(1)))
	refused := func() float64 {
		return metricValue(t, e, "metanode_http_requests_total", map[string]string{"route": "/", "code": "403"})
	}
	before := refused()
	res := runPage(t, page, e.url, claims)
	t.Logf("foreign page: %v", res)
	for _, k := range []string{"kv", "list", "token", "kvput"} {
		if res[k] != "blocked" {
			t.Errorf("%s from a foreign page: %q, want blocked", k, res[k])
		}
	}
	for _, k := range []string{"kv", "list", "token"} {
		if strings.Contains(res[k], "secret") || strings.Contains(res[k], testToken) {
			t.Errorf("%s: the page read %q", k, res[k])
		}
	}
	if got := refused() - before; got < 5 {
		t.Errorf("the server refused %v of the page's requests, want every one (the browser sent them)", got)
	}
	if a := e.get("/api/kv/value?key=sorter:cursor"); !strings.Contains(string(a.body), `"secret"`) {
		t.Errorf("the kv after the page: %s", a.body)
	}
	if m, err := e.c.Meta(context.Background(), cidA, api.MetaOptions{}); err != nil || m.Metadata["title"] != "secret title" {
		t.Errorf("the library after the page: %+v %v", m, err)
	}
	if _, err := e.c.Meta(context.Background(), cidB, api.MetaOptions{}); !isNotFound(err) {
		t.Errorf("the page's claim was stored: %v", err)
	}

	// Listed in cors-origins, the same page reads (a write still needs
	// the token, which it does not have).
	c := newEnv(t, withAPI(func(c *api.Config) { c.CORSOrigins = []string{origin}; withToken(c) }))
	c.sendJSON("PUT", "/api/kv/value", map[string]any{"key": "sorter:cursor", "value": "shared"})
	res = runPage(t, page, c.url, claims)
	t.Logf("allowed page: %v", res)
	if !strings.HasPrefix(res["kv"], "read 200") || !strings.Contains(res["kv"], "shared") {
		t.Errorf("kv from a cors-origins page: %q", res["kv"])
	}
	if !strings.HasPrefix(res["kvput"], "answered cors 401") {
		t.Errorf("kv write from a cors-origins page without the token: %q", res["kvput"])
	}
	if res["token"] != "blocked" && !strings.HasPrefix(res["token"], "read 403") {
		t.Errorf("the token to a cors-origins page: %q", res["token"])
	}
}
