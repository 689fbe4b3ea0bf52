package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/metanode/metanode/api"
)

// A trailing slash serves the route without it, on every route alike
// (before, /meta/{h}/ answered and /api/meta/{cid}/ was "no route"); a path
// with an empty or dot segment is a 404 in the envelope, never the mux's
// 307 with an HTML body (which could also read another key than asked).
func TestPaths_SlashesAndDots(t *testing.T) {
	e := newSeeded(t)
	for _, p := range []string{"/meta/" + cidA + "/", "/api/meta/" + cidA + "/", "/api/metadata/" + e.rid + "/",
		"/api/meta/" + cidA + "/claims/", "/meta/" + e.rid + "/title/", "/meta/"} {
		if a := e.get(p); a.status != http.StatusOK {
			t.Errorf("GET %s: %d %s", p, a.status, a.body)
		}
	}
	var res api.ClaimsResponse
	e.do(http.MethodPost, "/api/claims/", strings.NewReader(`{"claims":[]}`)).decode(t, &res)

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, p := range []string{"/api/file/" + cidA + "//info", "/meta/" + e.rid + "/genres//0", "/meta/" + e.rid + "/./title",
		"/api/meta/" + cidA + "/../" + cidB, "//meta", "/api/meta/" + cidA + "//"} {
		req, err := http.NewRequest(http.MethodGet, e.url+p, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.URL.Path = p // keep the dots: the client would clean them
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		a := answer{status: resp.StatusCode, header: resp.Header}
		a.body = readAll(t, resp)
		a.wantError(t, http.StatusNotFound, "unknown_root")
		wantMessage(t, p, envelope(t, a).Message, "the clean form is /")
	}
}

func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
