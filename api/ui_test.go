package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/store"
)

// The page and its files carry their own strict policy in place of the
// sandbox every other answer has: scripts and styles from the node's
// origin only, no inline code, no frames.
func TestUI_PageHeaders(t *testing.T) {
	e := newEnv(t, withAPI(withToken))
	for _, p := range []string{"/", "/ui/app.js", "/ui/style.css", "/ui/views/records.js", "/ui/icon.svg"} {
		a := e.get(p)
		csp := a.header.Get("Content-Security-Policy")
		if a.status != 200 || strings.Contains(csp, "sandbox") || !strings.Contains(csp, "script-src 'self';") ||
			strings.Contains(csp, "unsafe") || a.header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: %d %v", p, a.status, a.header)
		}
		if strings.HasSuffix(p, ".js") && !strings.HasPrefix(a.header.Get("Content-Type"), "text/javascript") {
			t.Errorf("GET %s: Content-Type %q", p, a.header.Get("Content-Type"))
		}
		if etag := a.header.Get("ETag"); e.rawReq("GET", p, "", "", "If-None-Match", etag).status != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: not 304", p)
		}
	}
	if a := e.get("/"); !strings.Contains(string(a.body), `<script type="module" src="/ui/app.js">`) {
		t.Errorf("the page: %s", a.body)
	}
	e.get("/ui/nope.js").wantError(t, 404, api.SlugUnknownRoot)
	e.get("/ui/../health").wantError(t, 404, api.SlugUnknownRoot)
	if a := e.get("/health"); a.header.Get("Content-Security-Policy") != "sandbox" {
		t.Errorf("other answers lost the sandbox: %v", a.header)
	}
	var info api.NodeInfo
	if e.get("/api/node").decode(t, &info); info.UID == "" || info.GUILogin {
		t.Errorf("node info %+v", info)
	}
}

// Beyond loopback (here: through a proxy, never local by its address) the
// page and the token ask for the GUI user and password; with none set,
// the page is refused, saying how to set one.
func TestUI_PasswordBeyondLoopback(t *testing.T) {
	proxied := []string{"X-Forwarded-For", "192.0.2.7"}
	same := []string{"Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "cors"}
	basic := func(user, pass string) []string {
		return []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))}
	}
	none := newEnv(t, withAPI(withToken))
	a := none.rawReq("GET", "/", "", "", proxied...)
	a.wantError(t, http.StatusForbidden, api.SlugForbidden)
	if !strings.Contains(string(a.body), "gui-password") {
		t.Errorf("the refusal does not say how to set a password: %s", a.body)
	}
	if a := none.rawReq("GET", "/", "", ""); a.status != 200 {
		t.Errorf("the page on loopback: %d", a.status)
	}

	hash, err := bcrypt.GenerateFromPassword([]byte("correct horse"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, withAPI(func(c *api.Config) { withToken(c); c.GUIUser, c.GUIPassword = "owner", string(hash) }))
	a = e.rawReq("GET", "/", "", "", proxied...)
	a.wantError(t, http.StatusUnauthorized, api.SlugUnauthorized)
	if !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Basic ") {
		t.Errorf("no Basic challenge: %v", a.header)
	}
	e.rawReq("GET", "/", "", "", append(proxied, basic("owner", "wrong horse")...)...).wantError(t, 401, api.SlugUnauthorized)
	e.rawReq("GET", "/", "", "", append(proxied, basic("admin", "correct horse")...)...).wantError(t, 401, api.SlugUnauthorized)
	if a := e.rawReq("GET", "/", "", "", append(proxied, basic("owner", "correct horse")...)...); a.status != 200 {
		t.Errorf("the page with the password: %d %s", a.status, a.body)
	}
	// The token, for the page's writes: same-origin and logged in.
	a = e.rawReq("GET", "/api/token", "", "", append(append(proxied, same...), basic("owner", "correct horse")...)...)
	var tok api.TokenResponse
	if a.decode(t, &tok); tok.Token != testToken {
		t.Errorf("token with the password: %s", a.body)
	}
	e.rawReq("GET", "/api/token", "", "", append(proxied, same...)...).wantError(t, 403, api.SlugForbiddenOrigin)
	e.rawReq("GET", "/api/token", "", "", append(append(proxied, same...), basic("owner", "nope")...)...).wantError(t, 403, api.SlugForbiddenOrigin)
	e.rawReq("GET", "/api/token", "evil.example", "", append(append(proxied, same...), basic("owner", "correct horse")...)...).wantError(t, 403, api.SlugForbiddenHost)
	// The password opens nothing else: the API still wants the token.
	e.rawReq("GET", "/api/trust", "", "", append(proxied, basic("owner", "correct horse")...)...).wantError(t, 401, api.SlugUnauthorized)

	for _, bad := range []api.Config{{GUIUser: "owner"}, {GUIUser: "owner", GUIPassword: "correct horse"}, {GUIPassword: string(hash)}} {
		bad.Addr, bad.Store, bad.Node = "127.0.0.1:0", e.st, e.node
		if err := api.NewServer(bad).Open(context.Background()); err == nil || !strings.Contains(err.Error(), "gui-") {
			t.Errorf("GUI settings %q/%q: %v", bad.GUIUser, bad.GUIPassword, err)
		}
	}
}

// GET /api/meta/{cid}/explain lists each field's claims with the winner
// first and why; a local file's record names the cid /file/ serves.
func TestUI_Explain(t *testing.T) {
	e := newEnv(t)
	other := mustSigner(t)
	e.post(e.text(cidA, "title", "Heat", e.ts(0)), other.Text(cidA, "title", "Ronin", e.ts(1)), e.text(cidA, "year", "1995", e.ts(0)))
	var ex api.ExplainResponse
	e.get("/api/meta/"+cidA+"/explain").decode(t, &ex)
	if ex.RID == "" || ex.CanonicalCID != cidA || len(ex.Fields) != 2 || ex.FileCID != "" {
		t.Fatalf("explain: %+v", ex)
	}
	title := ex.Fields[0]
	if title.Key != "title" || title.Value != "Heat" || len(title.Votes) != 2 || title.Votes[0].Why != store.WhyWon ||
		title.Votes[0].UID != e.signer.UID() || title.Votes[1].Why != store.WhyOutvoted || title.Reason == "" {
		t.Errorf("title: %+v", title)
	}
	var byRID api.ExplainResponse
	if e.get("/api/meta/"+strings.ToLower(ex.RID)+"/explain").decode(t, &byRID); byRID.RID != ex.RID {
		t.Errorf("by rid: %+v", byRID)
	}
	e.get("/api/meta/"+cidC+"/explain").wantError(t, 404, api.SlugUnknownCID)
	e.get("/api/meta/notacid/explain").wantError(t, 404, api.SlugUnknownCID)

	writeFile(t, filepath.Join(e.root, "plugin/film.mkv"), "some film")
	r, err := e.c.RegisterFile(t.Context(), "plugin/film.mkv")
	if err != nil {
		t.Fatal(err)
	}
	if e.get("/api/meta/"+r.CID+"/explain").decode(t, &ex); ex.FileCID != r.CID {
		t.Errorf("a local file's record: %+v", ex)
	}
}

// POST /api/qr draws a QR code as SVG, stores nothing, and refuses text
// no QR code holds.
func TestUI_QR(t *testing.T) {
	e := newEnv(t, withAPI(withToken))
	a := e.sendJSON("POST", "/api/qr", map[string]string{"text": "mn1:" + strings.Repeat("x", 900)})
	if a.status != 200 || a.header.Get("Content-Type") != "image/svg+xml" || !strings.HasPrefix(string(a.body), "<svg ") ||
		!strings.Contains(string(a.body), `<path fill="#000" d="M`) {
		t.Fatalf("qr: %d %v %.200s", a.status, a.header, a.body)
	}
	e.sendJSON("POST", "/api/qr", map[string]string{"text": ""}).wantError(t, 400, api.SlugSchemaViolation)
	e.sendJSON("POST", "/api/qr", map[string]string{"text": strings.Repeat("x", 3000)}).wantError(t, 400, api.SlugSchemaViolation)
	// A browser draws without the token: it only reads.
	if a := e.rawReq("POST", "/api/qr", "", `{"text":"hello"}`, "Sec-Fetch-Site", "same-origin", "Content-Type", "application/json"); a.status != 200 {
		t.Errorf("a page's qr without the token: %d %s", a.status, a.body)
	}
}

// GET /api/events/files/recent answers the newest file events, oldest
// first, to follow the stream after.
func TestUI_RecentFiles(t *testing.T) {
	e := newEnv(t)
	for _, name := range []string{"a", "b", "c"} {
		writeFile(t, filepath.Join(e.root, "plugin", name), "content "+name)
		if _, err := e.c.RegisterFile(t.Context(), "plugin/"+name); err != nil {
			t.Fatal(err)
		}
	}
	var got struct{ Events []api.RecentEvent }
	e.get("/api/events/files/recent?limit=2").decode(t, &got)
	if len(got.Events) != 2 || got.Events[0].ID >= got.Events[1].ID {
		t.Fatalf("recent: %+v", got)
	}
	var d struct{ Path string }
	if err := json.Unmarshal(got.Events[1].Data, &d); err != nil || d.Path != "plugin/c" {
		t.Errorf("the newest event: %s %v", got.Events[1].Data, err)
	}
	e.get("/api/events/files/recent?limit=0").wantError(t, 400, api.SlugSchemaViolation)
	e.get("/api/events/files/recent?limit=x").wantError(t, 400, api.SlugSchemaViolation)
}
