package api_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/store"
)

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRegisterFile(t *testing.T) {
	e := newEnv(t)
	content := "JFIF poster bytes"
	writeFile(t, filepath.Join(e.root, "plugin/tmdb/poster.jpg"), content)

	a := e.sendJSON(http.MethodPost, "/api/files/register", map[string]string{"path": "plugin/tmdb/poster.jpg"})
	if a.status != http.StatusCreated {
		t.Fatalf("register: %d %s", a.status, a.body)
	}
	wantKeys(t, a.body, "root", "cid", "created", "path", "size")
	var r api.RegisterResult
	a.decode(t, &r)
	wantCID, _, _ := store.Midhash256File(filepath.Join(e.root, "plugin/tmdb/poster.jpg"))
	// path is relative to the files root, as upstream answered it.
	if !r.Created || r.CID != wantCID || r.Size != int64(len(content)) || !store.IsRID(r.Root) ||
		r.Path != "plugin/tmdb/poster.jpg" {
		t.Errorf("register: %+v", r)
	}
	again, err := e.c.RegisterFile(t.Context(), "plugin/tmdb/poster.jpg")
	if err != nil || again.Created || again.Root != r.Root {
		t.Errorf("second register: %+v %v", again, err)
	}

	// The record now has the box-local fields.
	m, err := e.c.Meta(t.Context(), r.CID, api.MetaOptions{})
	if err != nil || m.Metadata["filePath"] != filepath.Join(e.root, r.Path) || m.Metadata["sizeByte"] == "" {
		t.Errorf("record of the file: %+v %v", m, err)
	}

	e.sendJSON(http.MethodPost, "/api/files/register", map[string]string{"path": "plugin/missing.jpg"}).wantError(t, 404, "unknown_root")
	e.sendJSON(http.MethodPost, "/api/files/register", map[string]string{"path": "plugin/tmdb"}).wantError(t, 400, "schema_violation")
	for _, p := range []string{"", " ", "/", "poster.jpg", "watch/a.mkv", "plugin/../watch/a.mkv", "plugin/tmdb/../poster.jpg",
		"/etc/passwd", "//plugin/tmdb/poster.jpg", "plugin/", "plugin/.", "plugin", "/plugin",
		"plugin\\tmdb\\poster.jpg", "plugin/tmdb/poster.jpg\x00", "..", "plugin/.."} {
		e.sendJSON(http.MethodPost, "/api/files/register", map[string]string{"path": p}).wantError(t, 400, "schema_violation")
	}
	// Upstream's forms of a path under plugin/ are cleaned, as it did (a
	// leading "/" or "./", "//", "/./", surrounding spaces), and answered in the clean form.
	for _, p := range []string{"/plugin/tmdb/poster.jpg", "plugin//tmdb/poster.jpg", "plugin/./tmdb/poster.jpg",
		" plugin/tmdb/poster.jpg\n", "plugin/tmdb//poster.jpg/", "plugin/tmdb/./poster.jpg", "./plugin/tmdb/poster.jpg"} {
		var got api.RegisterResult
		a := e.sendJSON(http.MethodPost, "/api/files/register", map[string]string{"path": p})
		if a.decode(t, &got); a.status != 200 || got.Path != "plugin/tmdb/poster.jpg" || got.Root != r.Root || got.Created {
			t.Errorf("register %q: %d %+v", p, a.status, got)
		}
	}
	// A symlink under plugin/ that leads out of the root is refused.
	outside := filepath.Join(t.TempDir(), "secret.txt")
	writeFile(t, outside, "secret")
	if err := os.Symlink(outside, filepath.Join(e.root, "plugin/evil.txt")); err != nil {
		t.Fatal(err)
	}
	e.sendJSON(http.MethodPost, "/api/files/register", map[string]string{"path": "plugin/evil.txt"}).wantError(t, 400, "schema_violation")
	// Paths that cannot resolve are the caller's mistake (400), not a
	// retryable 500: a file used as a directory, a symlink loop.
	e.sendJSON(http.MethodPost, "/api/files/register", map[string]string{"path": "plugin/tmdb/poster.jpg/b"}).wantError(t, 400, "schema_violation")
	if err := os.Symlink("loop", filepath.Join(e.root, "plugin/loop")); err != nil {
		t.Fatal(err)
	}
	e.sendJSON(http.MethodPost, "/api/files/register", map[string]string{"path": "plugin/loop"}).wantError(t, 400, "schema_violation")
}

func TestFileServing(t *testing.T) {
	e := newEnv(t)
	content := "0123456789abcdefghij"
	writeFile(t, filepath.Join(e.root, "plugin/a.txt"), content)
	r, err := e.c.RegisterFile(t.Context(), "plugin/a.txt")
	if err != nil {
		t.Fatal(err)
	}

	a := e.get("/file/" + r.CID)
	if a.status != 200 || string(a.body) != content || a.header.Get("Accept-Ranges") != "bytes" {
		t.Errorf("full: %d %q %v", a.status, a.body, a.header)
	}
	a = e.do(http.MethodGet, "/file/"+r.CID, nil, "Range", "bytes=2-5")
	if a.status != http.StatusPartialContent || string(a.body) != "2345" || a.header.Get("Content-Range") != "bytes 2-5/20" {
		t.Errorf("range: %d %q %v", a.status, a.body, a.header)
	}
	// ServeContent's own refusals get the envelope too, not its text/plain.
	a = e.do(http.MethodGet, "/file/"+r.CID, nil, "Range", "bytes=100-200")
	a.wantError(t, http.StatusRequestedRangeNotSatisfiable, "range_not_satisfiable")
	if a.header.Get("Content-Range") != "bytes */20" {
		t.Errorf("range past the end: Content-Range %q, want bytes */20", a.header.Get("Content-Range"))
	}
	// A suffix of zero bytes selects nothing (RFC 9110 §14.1.2): 416, where
	// http.ServeContent answers 206 with an invalid Content-Range
	// (golang/go#81262), alone, in any spelling ServeContent reads; beside
	// a satisfiable range it is dropped and that range served (RFC 9110:
	// a Range is satisfiable when any of its specs is).
	for _, rg := range []string{"bytes=-0", "bytes= -000", "bytes=- 0", "bytes=-+0", "bytes=-0,-0", "bytes=,-0,"} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			a = e.do(method, "/file/"+r.CID, nil, "Range", rg)
			if method == http.MethodHead {
				if a.status != http.StatusRequestedRangeNotSatisfiable || len(a.body) != 0 {
					t.Errorf("HEAD %s: %d %q", rg, a.status, a.body)
				}
			} else {
				a.wantError(t, http.StatusRequestedRangeNotSatisfiable, "range_not_satisfiable")
			}
			if a.header.Get("Content-Range") != "bytes */20" {
				t.Errorf("%s %s: Content-Range %q, want bytes */20", method, rg, a.header.Get("Content-Range"))
			}
		}
	}
	// Where ServeContent does not honour the Range, neither does the check.
	a = e.do(http.MethodGet, "/file/"+r.CID, nil, "Range", "bytes=-0", "If-Range", `"other"`)
	if a.status != 200 || string(a.body) != content {
		t.Errorf("-0 with an If-Range that does not match: %d %q", a.status, a.body)
	}
	e.do(http.MethodGet, "/file/"+r.CID, nil, "Range", "bytes=-0", "If-Match", `"other"`).wantError(t, http.StatusPreconditionFailed, "precondition_failed")
	for rg, want := range map[string]string{"bytes=0-1,-0": "bytes 0-1/20", "bytes=-0, 3-4": "bytes 3-4/20", "bytes=-1": "bytes 19-19/20", "bytes=-10": "bytes 10-19/20", "bytes=-100": "bytes 0-19/20", "bytes=10-": "bytes 10-19/20"} {
		if a = e.do(http.MethodGet, "/file/"+r.CID, nil, "Range", rg); a.status != http.StatusPartialContent || a.header.Get("Content-Range") != want {
			t.Errorf("%s: %d %q, Content-Range %q, want %q", rg, a.status, a.body, a.header.Get("Content-Range"), want)
		}
	}
	e.do(http.MethodGet, "/file/"+r.CID, nil, "If-Match", `"other"`).wantError(t, http.StatusPreconditionFailed, "precondition_failed")
	a = e.do(http.MethodGet, "/file/"+r.CID, nil, "If-Modified-Since", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
	if a.status != http.StatusNotModified || len(a.body) != 0 {
		t.Errorf("not modified: %d %q", a.status, a.body)
	}
	e.get("/file/"+cidC).wantError(t, 404, "unknown_cid")

	a = e.get("/api/file/" + r.CID + "/info")
	var fi api.FileInfo
	a.decode(t, &fi)
	if !fi.Exists || fi.Size == nil || *fi.Size != 20 || fi.FilePath != filepath.Join(e.root, r.Path) || !strings.HasPrefix(fi.ContentType, "text/plain") {
		t.Errorf("info: %+v", fi)
	}
	a = e.get("/api/file/" + cidC + "/info")
	if a.status != 200 || strings.TrimSpace(string(a.body)) != `{"exists":false}` {
		t.Errorf("info of unknown: %d %s", a.status, a.body)
	}

	// Tuples.
	a = e.get("/api/files/tuples")
	wantKeys(t, a.body, "files", "count", "totalSize")
	var tu api.FileTuplesResponse
	a.decode(t, &tu)
	if tu.Count != 1 || tu.TotalSize != 20 || tu.Files == nil || len(*tu.Files) != 1 ||
		(*tu.Files)[0].HashID != r.Root || (*tu.Files)[0].FilePath != filepath.Join(e.root, r.Path) || (*tu.Files)[0].SizeByte != 20 || (*tu.Files)[0].MtimeNano == 0 {
		t.Errorf("tuples: %+v", tu)
	}
	a = e.get("/api/files/tuples?summary=1")
	wantKeys(t, a.body, "count", "totalSize")

	// Swap the registered file for a symlink out of the root: never served.
	outside := filepath.Join(t.TempDir(), "secret.txt")
	writeFile(t, outside, "secret")
	if err := os.Remove(filepath.Join(e.root, "plugin/a.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(e.root, "plugin/a.txt")); err != nil {
		t.Fatal(err)
	}
	a = e.get("/file/" + r.CID)
	a.wantError(t, 404, "unknown_cid")
	if strings.Contains(string(a.body), "secret") {
		t.Errorf("served outside the root: %s", a.body)
	}
	a = e.get("/api/file/" + r.CID + "/info")
	if strings.TrimSpace(string(a.body)) != `{"exists":false}` {
		t.Errorf("info of an escaping file: %s", a.body)
	}

}

// An empty file: "-0" is the only suffix range it could be asked for, and
// ServeContent answered it 206 with "Content-Range: bytes 0--1/0".
func TestFileServing_EmptyFileZeroSuffix(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.root, "plugin/empty.bin"), "")
	empty, err := e.c.RegisterFile(t.Context(), "plugin/empty.bin")
	if err != nil {
		t.Fatal(err)
	}
	a := e.do(http.MethodGet, "/file/"+empty.CID, nil, "Range", "bytes=-0")
	a.wantError(t, http.StatusRequestedRangeNotSatisfiable, "range_not_satisfiable")
	if a.header.Get("Content-Range") != "bytes */0" {
		t.Errorf("empty file, -0: Content-Range %q, want bytes */0", a.header.Get("Content-Range"))
	}
	if a = e.get("/file/" + empty.CID); a.status != 200 || len(a.body) != 0 {
		t.Errorf("empty file: %d %q", a.status, a.body)
	}
}

func TestFileServing_OutsideRoot(t *testing.T) {
	e := newEnv(t)
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret.txt"), "secret")
	addLocal := func(st *store.Store, cid, path string) {
		t.Helper()
		fi, err := os.Stat(path) // the row as the watcher makes it: only where it points is wrong
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.ApplyFiles(t.Context(), []store.FileUpdate{{Op: store.FileAdd,
			File: store.LocalFile{Path: path, CID: cid, Size: fi.Size(), MtimeNano: fi.ModTime().UnixNano()}, EventPath: filepath.Base(path)}}); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range []string{
		filepath.Join(outside, "secret.txt"),                              // plainly outside
		filepath.Join(e.root, "..", filepath.Base(outside), "secret.txt"), // out through ..
		e.root, // the root itself: a directory
	} {
		addLocal(e.st, cidN(i), p)
		a := e.get("/file/" + cidN(i))
		a.wantError(t, 404, "unknown_cid")
		if strings.Contains(string(a.body), "secret") || strings.Contains(string(a.body), outside) {
			t.Errorf("%s: %s", p, a.body)
		}
	}

	// A files root reached through a symlink still serves its own files.
	link := filepath.Join(t.TempDir(), "root-link")
	target := t.TempDir()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	e2 := newEnv(t, withAPI(func(c *api.Config) { c.FilesRoot = link }))
	writeFile(t, filepath.Join(target, "in.txt"), "inside")
	addLocal(e2.st, cidA, filepath.Join(link, "in.txt"))
	if a := e2.get("/file/" + cidA); a.status != 200 || string(a.body) != "inside" {
		t.Errorf("through a linked root: %d %s", a.status, a.body)
	}
}

// TestFileServing_ChangedSinceHashed: a file rewritten after it was hashed
// (before the watcher hashes it again) is another content: neither its
// bytes nor its size are served for the old cid (review s12 C3).
func TestFileServing_ChangedSinceHashed(t *testing.T) {
	e := newEnv(t)
	p := filepath.Join(e.root, "plugin/a.bin")
	writeFile(t, p, "old bytes")
	r, err := e.c.RegisterFile(t.Context(), "plugin/a.bin")
	if err != nil {
		t.Fatal(err)
	}
	if a := e.get("/file/" + r.CID); a.status != 200 || string(a.body) != "old bytes" {
		t.Fatalf("before the change: %d %s", a.status, a.body)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, content string
		mtime         time.Time
	}{
		{"new size", "NEW", fi.ModTime()},
		{"same size, new mtime", "new bytes", fi.ModTime().Add(time.Second)},
	} {
		writeFile(t, p, c.content)
		if err := os.Chtimes(p, c.mtime, c.mtime); err != nil {
			t.Fatal(err)
		}
		a := e.get("/file/" + r.CID)
		a.wantError(t, 404, "unknown_cid")
		if strings.Contains(string(a.body), c.content) {
			t.Errorf("%s: served %q", c.name, a.body)
		}
		if a := e.get("/api/file/" + r.CID + "/info"); a.status != 200 || !strings.Contains(string(a.body), `"exists":false`) {
			t.Errorf("%s: info %d %s, want exists false", c.name, a.status, a.body)
		}
	}
}

// TestFileServing_NeverThroughALink: a registered file replaced by a
// symlink is not served, even when the link stays inside the root
// (docs/watcher.md: the row names the file at its own path; the link's
// target has a cid of its own, or none).
func TestFileServing_NeverThroughALink(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.root, "plugin/a.txt"), "AAAA")
	writeFile(t, filepath.Join(e.root, "private/other.txt"), "other bytes")
	r, err := e.c.RegisterFile(t.Context(), "plugin/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(e.root, "plugin/a.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../private/other.txt", filepath.Join(e.root, "plugin/a.txt")); err != nil {
		t.Skipf("no symlinks here: %v", err)
	}
	a := e.get("/file/" + r.CID)
	a.wantError(t, 404, "unknown_cid")
	if strings.Contains(string(a.body), "other bytes") {
		t.Errorf("served the link's target: %s", a.body)
	}
}

// TestFileServing_OtherCIDForm: /file/{cid} serves a cid written in
// another form (upper-case base32) as /api/file/{cid}/info answers it:
// a consumer that asked info and got exists:true gets the bytes.
func TestFileServing_OtherCIDForm(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.root, "plugin/a.txt"), "0123456789")
	r, err := e.c.RegisterFile(t.Context(), "plugin/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	up := strings.ToUpper(r.CID)
	if info := e.get("/api/file/" + up + "/info"); info.status != 200 || !strings.Contains(string(info.body), `"exists":true`) {
		t.Fatalf("info of %s: %d %s", up, info.status, info.body)
	}
	if f := e.get("/file/" + up); f.status != 200 || string(f.body) != "0123456789" {
		t.Errorf("GET /file/%s: %d %q", up, f.status, f.body)
	}
	e.get("/file/"+strings.ToUpper(cidN(7))).wantError(t, 404, "unknown_cid")
}
