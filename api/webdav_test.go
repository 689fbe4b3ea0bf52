package api_test

import (
	"encoding/xml"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/metanode/metanode/api"
)

// davListing is a PROPFIND answer's hrefs and sizes.
type davListing struct {
	Responses []struct {
		Href string `xml:"href"`
		Size string `xml:"propstat>prop>getcontentlength"`
	} `xml:"response"`
}

func (e *env) propfind(p, depth string) (int, davListing) {
	e.t.Helper()
	hdr := []string{"Content-Type", "application/xml"}
	if depth != "" {
		hdr = append(hdr, "Depth", depth)
	}
	a := e.rawReq("PROPFIND", p, "", `<?xml version="1.0"?><propfind xmlns="DAV:"><allprop/></propfind>`, hdr...)
	var l davListing
	if a.status == http.StatusMultiStatus {
		if err := xml.Unmarshal(a.body, &l); err != nil {
			e.t.Fatalf("PROPFIND %s: %v: %s", p, err, a.body)
		}
	}
	return a.status, l
}

func (l davListing) hrefs() []string {
	var out []string
	for _, r := range l.Responses {
		out = append(out, r.Href)
	}
	slices.Sort(out)
	return out
}

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, body := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The files root over WebDAV, as meta-fuse and the plugins read it:
// a directory listing, ranged reads, HEAD; nothing outside the root, not
// even through a symlink; writes refused while read-only.
func TestWebDAV_ReadOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	writeTree(t, e.root, map[string]string{"watch/movie.mkv": "0123456789abcdef", "watch/sub/a.srt": "subtitle"})
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"secret.txt": "do not serve"})
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(e.root, "watch", "leak.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(e.root, "watch", "leakdir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("movie.mkv", filepath.Join(e.root, "watch", "alias.mkv")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(e.root, "watch", "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}

	a := e.rawReq("OPTIONS", "/webdav/watch", "", "")
	if a.status != 200 || !strings.Contains(a.header.Get("DAV"), "1") {
		t.Fatalf("OPTIONS: %d, DAV %q", a.status, a.header.Get("DAV"))
	}
	st, l := e.propfind("/webdav/watch/", "1")
	if st != http.StatusMultiStatus {
		t.Fatalf("PROPFIND: %d", st)
	}
	want := []string{"/webdav/watch/", "/webdav/watch/alias.mkv", "/webdav/watch/movie.mkv", "/webdav/watch/sub/"}
	if got := l.hrefs(); !slices.Equal(got, want) {
		t.Fatalf("PROPFIND listed %v, want %v (no link out of the root, no FIFO)", got, want)
	}
	for _, r := range l.Responses {
		if strings.HasSuffix(r.Href, ".mkv") && r.Size != "16" {
			t.Errorf("%s: getcontentlength %q", r.Href, r.Size)
		}
	}
	// No Depth is one level, as clients mean it; infinity is refused.
	if st, l := e.propfind("/webdav/", ""); st != http.StatusMultiStatus || len(l.Responses) != 2 {
		t.Errorf("PROPFIND without Depth: %d, %v", st, l.hrefs())
	}
	e.rawReq("PROPFIND", "/webdav/", "", "", "Depth", "infinity").wantError(t, http.StatusForbidden, api.SlugForbidden)

	a = e.rawReq("GET", "/webdav/watch/movie.mkv", "", "", "Range", "bytes=4-7")
	if a.status != http.StatusPartialContent || string(a.body) != "4567" || a.header.Get("Content-Range") != "bytes 4-7/16" {
		t.Fatalf("ranged GET: %d %q %q", a.status, a.body, a.header.Get("Content-Range"))
	}
	if a = e.rawReq("GET", "/webdav/watch/alias.mkv", "", ""); a.status != 200 || string(a.body) != "0123456789abcdef" {
		t.Errorf("GET through a link inside the root: %d %q", a.status, a.body)
	}
	if a = e.rawReq("HEAD", "/webdav/watch/sub/a.srt", "", ""); a.status != 200 || a.header.Get("Content-Length") != "8" {
		t.Errorf("HEAD: %d, Content-Length %q", a.status, a.header.Get("Content-Length"))
	}
	e.rawReq("GET", "/webdav/watch/movie.mkv", "", "", "Range", "bytes=99-").wantError(t, http.StatusRequestedRangeNotSatisfiable, "range_not_satisfiable")

	// Out of the root: by a link, by a name, by a FIFO.
	for _, p := range []string{"/webdav/watch/leak.txt", "/webdav/watch/leakdir/secret.txt", "/webdav/watch/pipe",
		"/webdav/../" + filepath.Base(outside) + "/secret.txt", "/webdav/watch/%2e%2e/%2e%2e/etc/passwd", "/webdav/nope"} {
		a := e.rawReq("GET", p, "", "")
		a.wantError(t, http.StatusNotFound, "unknown_root")
		if strings.Contains(string(a.body), "do not serve") {
			t.Fatalf("GET %s served the file outside the root", p)
		}
	}
	if st, _ := e.propfind("/webdav/watch/leakdir", "1"); st != http.StatusNotFound {
		t.Errorf("PROPFIND of a link out of the root: %d", st)
	}

	// Read-only: every write is 403 in the envelope, and changes nothing.
	for _, m := range []string{"PUT", "DELETE", "MKCOL", "MOVE", "COPY", "PROPPATCH", "LOCK"} {
		a := e.rawReq(m, "/webdav/plugin/x.txt", "", "data", "Destination", e.url+"/webdav/plugin/y.txt")
		a.wantError(t, http.StatusForbidden, api.SlugForbidden)
		if !strings.Contains(string(a.body), "webdav-writes") {
			t.Errorf("%s: %s does not name the setting", m, a.body)
		}
	}
	if _, err := os.Stat(filepath.Join(e.root, "plugin")); !os.IsNotExist(err) {
		t.Fatalf("a refused write made %s: %v", filepath.Join(e.root, "plugin"), err)
	}
}

// With webdav-writes, plugins write their output under plugin/ and
// nowhere else; it reads back, and a file's write stays in the root.
func TestWebDAV_Writes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withAPI(func(c *api.Config) { c.WebDAVWrites = true }))
	writeTree(t, e.root, map[string]string{"watch/movie.mkv": "video"})
	e.rawReq("MKCOL", "/webdav/plugin", "", "")
	if a := e.rawReq("MKCOL", "/webdav/plugin/tmdb", "", ""); a.status != http.StatusCreated {
		t.Fatalf("MKCOL: %d %s", a.status, a.body)
	}
	if a := e.rawReq("PUT", "/webdav/plugin/tmdb/poster.jpg", "", "JPEG"); a.status != http.StatusCreated {
		t.Fatalf("PUT: %d %s", a.status, a.body)
	}
	if b, err := os.ReadFile(filepath.Join(e.root, "plugin", "tmdb", "poster.jpg")); err != nil || string(b) != "JPEG" {
		t.Fatalf("the PUT file: %q, %v", b, err)
	}
	if a := e.rawReq("GET", "/webdav/plugin/tmdb/poster.jpg", "", ""); string(a.body) != "JPEG" {
		t.Errorf("GET after PUT: %d %q", a.status, a.body)
	}
	for _, c := range []struct{ method, path, dest string }{
		{"PUT", "/webdav/watch/movie.mkv", ""},
		{"DELETE", "/webdav/watch/movie.mkv", ""},
		{"PUT", "/webdav/plugin/../watch/movie.mkv", ""},
		{"MOVE", "/webdav/plugin/tmdb/poster.jpg", "/webdav/watch/poster.jpg"},
		{"COPY", "/webdav/plugin/tmdb/poster.jpg", "/webdav/../poster.jpg"},
	} {
		a := e.rawReq(c.method, c.path, "", "x", "Destination", e.url+c.dest)
		if a.status != http.StatusForbidden && a.status != http.StatusNotFound {
			t.Errorf("%s %s → %s: %d %s", c.method, c.path, c.dest, a.status, a.body)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(e.root, "watch", "movie.mkv")); string(b) != "video" {
		t.Errorf("a write outside plugin/ changed watch/movie.mkv: %q", b)
	}
	// A write from another site's page is refused as every write is.
	e.rawReq("PUT", "/webdav/plugin/tmdb/x.jpg", "", "x", "Origin", "http://evil.example").wantError(t, http.StatusForbidden, api.SlugForbiddenOrigin)
}

// /urls names the WebDAV URLs a container on the same network uses: the
// host name on the API's own port.
func TestWebDAV_URLs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var u api.URLs
	e.get("/urls").decode(t, &u)
	host, _ := os.Hostname()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(e.url, "http://"))
	if u.Hostname != host || u.WebDAVURL != e.url+"/webdav" || u.WebDAVURLInternal != "http://"+net.JoinHostPort(host, port)+"/webdav" || u.RedisURL != "" {
		t.Fatalf("/urls %+v", u)
	}
	// No files root, no WebDAV: the URLs are empty and the route is not served.
	e = newEnv(t, withAPI(func(c *api.Config) { c.FilesRoot = "" }))
	e.get("/urls").decode(t, &u)
	if u.WebDAVURL != "" || u.WebDAVURLInternal != "" {
		t.Fatalf("/urls without a files root: %+v", u)
	}
	e.get("/webdav/").wantError(t, http.StatusNotFound, "unknown_root")
}
