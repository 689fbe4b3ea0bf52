package api

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/webdav"
)

// The files root over WebDAV at /webdav/, for the meta services that read
// file content that way (meta-fuse, plugins: /urls gives the URL).
// golang.org/x/net/webdav speaks the protocol; davFS confines it to the
// root through os.Root, so no name and no symlink leads out of it.
// Read-only unless Config.WebDAVWrites, and then writable under plugin/
// only, where plugins put their output (as POST /api/files/register).

// SlugForbidden answers a WebDAV request the server will not serve: a
// write while read-only or outside plugin/, a PROPFIND of infinite depth.
const SlugForbidden = "forbidden"

func forbidden(format string, args ...any) *Error {
	return &Error{Status: http.StatusForbidden, Slug: SlugForbidden, Message: fmt.Sprintf(format, args...)}
}

// davWriteMethods change something: refused (403) on a read-only server.
var davWriteMethods = map[string]bool{
	http.MethodPut: true, http.MethodDelete: true, http.MethodPost: true, http.MethodPatch: true,
	"MKCOL": true, "COPY": true, "MOVE": true, "PROPPATCH": true, "LOCK": true, "UNLOCK": true,
}

// davWritable is the subtree writes may touch, when enabled.
const davWritable = "/plugin"

// maxDavUpload is the largest WebDAV PUT body.
const maxDavUpload = 1 << 30

func newWebDAV(filesRoot string, writes bool) *webdav.Handler {
	return &webdav.Handler{
		Prefix:     WebDAVPrefix,
		FileSystem: davFS{root: filesRoot, writes: writes},
		LockSystem: webdav.NewMemLS(),
	}
}

// handleWebDAV checks what the WebDAV library would not: writes (refused,
// or browser-checked and kept under plugin/), a PROPFIND's depth (an
// unbounded walk of the library is refused) and the body's size; then
// serves, with its error answers in the envelope.
func (s *Server) handleWebDAV(w http.ResponseWriter, r *http.Request) error {
	if davWriteMethods[r.Method] {
		if err := s.davWriteAllowed(r); err != nil {
			return err
		}
	}
	if r.Method == "PROPFIND" {
		switch r.Header.Get("Depth") {
		case "":
			// RFC 4918 reads none as infinity; clients listing a
			// directory send 1, and a walk of the whole library is not
			// served.
			r.Header.Set("Depth", "1")
		case "infinity":
			return forbidden("PROPFIND with Depth: infinity is not served: list one level at a time (Depth: 1)")
		}
	}
	limit := int64(maxSmallBody) // PROPFIND, PROPPATCH and LOCK bodies: small XML
	if r.Method == http.MethodGet || r.Method == http.MethodPut {
		// Media downloads and uploads outlive the server's 30 s deadlines.
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Time{})
		_ = rc.SetReadDeadline(time.Time{})
		limit = maxDavUpload // a PUT streams to disk
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	ew := &davErrorWriter{ResponseWriter: w}
	s.webdav.ServeHTTP(ew, r)
	if ew.failed != 0 {
		return errorf(ew.failed, "WebDAV %s %s: %s", r.Method, r.URL.Path, strings.ToLower(http.StatusText(ew.failed)))
	}
	return nil
}

// davWriteAllowed: writes are off unless enabled; then they stay under
// plugin/, Destination (COPY, MOVE) too. The server admitted them as
// writes (access.go: a browser's needs the token).
func (s *Server) davWriteAllowed(r *http.Request) error {
	if !s.cfg.WebDAVWrites {
		return forbidden("WebDAV is read-only here: %s %s is refused (webdav-writes: true lets plugins write under %s/)",
			r.Method, r.URL.Path, WebDAVPrefix+davWritable)
	}
	paths := []string{r.URL.Path}
	if d := r.Header.Get("Destination"); d != "" {
		u, err := url.Parse(d)
		if err != nil {
			return badRequest("Destination %q is not a URL", d)
		}
		paths = append(paths, u.Path)
	}
	for _, p := range paths {
		rel := strings.TrimPrefix(p, WebDAVPrefix)
		if clean := path.Clean("/" + rel); clean != davWritable && !strings.HasPrefix(clean, davWritable+"/") {
			return forbidden("WebDAV writes are allowed under %s/ only, not %s", WebDAVPrefix+davWritable, p)
		}
	}
	return nil
}

// davErrorWriter holds back the WebDAV library's error answers (plain
// text), so the handler answers them in the envelope like every error.
type davErrorWriter struct {
	http.ResponseWriter
	failed int
}

func (w *davErrorWriter) WriteHeader(code int) {
	if code >= 400 {
		w.failed = code
		w.Header().Del("Content-Length")
		w.Header().Del("Content-Type")
		w.Header().Del("X-Content-Type-Options")
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *davErrorWriter) Write(b []byte) (int, error) {
	if w.failed != 0 {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *davErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// davFS is webdav.FileSystem over the files root, opened per call through
// os.Root: a name cannot climb out of it, and a symlink that leads out of
// it is refused (as GET /file/{cid} refuses one). Only directories and
// regular files are seen: a FIFO, socket or device is not there.
type davFS struct {
	root   string
	writes bool
}

// rel is a WebDAV name ("/a/b") as a path relative to the root.
func rel(name string) string {
	if r := strings.TrimPrefix(path.Clean("/"+name), "/"); r != "" {
		return r
	}
	return "."
}

func (d davFS) open() (*os.Root, error) {
	r, err := os.OpenRoot(d.root)
	if err != nil {
		return nil, fmt.Errorf("files root: %w", err)
	}
	return r, nil
}

func (d davFS) writable() error {
	if !d.writes {
		return fs.ErrPermission
	}
	return nil
}

// change runs a write on the root, when writes are on.
func (d davFS) change(op func(r *os.Root) error) error {
	if err := d.writable(); err != nil {
		return err
	}
	r, err := d.open()
	if err != nil {
		return err
	}
	defer r.Close()
	return op(r)
}

func (d davFS) Mkdir(_ context.Context, name string, perm os.FileMode) error {
	return d.change(func(r *os.Root) error { return r.Mkdir(rel(name), perm) })
}

func (d davFS) OpenFile(_ context.Context, name string, flag int, perm os.FileMode) (webdav.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 {
		if err := d.writable(); err != nil {
			return nil, err
		}
	} else {
		flag |= syscall.O_NONBLOCK // a FIFO swapped in would wait for a writer
	}
	r, err := d.open()
	if err != nil {
		return nil, err
	}
	f, err := r.OpenFile(rel(name), flag, perm)
	if err != nil {
		r.Close()
		return nil, err
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() && !info.IsDir() {
		err = fs.ErrNotExist
	}
	if err != nil {
		f.Close()
		r.Close()
		return nil, err
	}
	return &davFile{File: f, root: r, dir: rel(name)}, nil
}

func (d davFS) RemoveAll(_ context.Context, name string) error {
	if rel(name) == "." {
		return fs.ErrPermission // never the root itself
	}
	return d.change(func(r *os.Root) error { return r.RemoveAll(rel(name)) })
}

func (d davFS) Rename(_ context.Context, oldName, newName string) error {
	return d.change(func(r *os.Root) error { return r.Rename(rel(oldName), rel(newName)) })
}

func (d davFS) Stat(_ context.Context, name string) (os.FileInfo, error) {
	r, err := d.open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return seen(r, rel(name))
}

// seen stats name through the root (a symlink inside it followed), and
// hides what a client may not read: a link leading out, a FIFO, a device.
func seen(r *os.Root, name string) (os.FileInfo, error) {
	info, err := r.Stat(name)
	if err != nil && !errors.Is(err, fs.ErrPermission) {
		// os.Root's "path escapes from parent" included: outside the
		// root there is nothing. A PathError: the WebDAV library tests
		// with os.IsNotExist, which unwraps no %w.
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() && !info.IsDir() {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return info, nil
}

// davFile is a file or directory opened under the root; its listing
// shows only what Stat would.
type davFile struct {
	*os.File
	root *os.Root
	dir  string
}

func (f *davFile) Readdir(n int) ([]os.FileInfo, error) {
	infos, err := f.File.Readdir(n)
	out := infos[:0]
	for _, fi := range infos {
		if fi.Mode()&os.ModeSymlink != 0 || (!fi.Mode().IsRegular() && !fi.IsDir()) {
			target, serr := seen(f.root, path.Join(f.dir, fi.Name()))
			if serr != nil {
				continue
			}
			fi = renamed{target, fi.Name()}
		}
		out = append(out, fi)
	}
	return out, err
}

func (f *davFile) Close() error {
	return errors.Join(f.File.Close(), f.root.Close())
}

// renamed is a symlink's target under the link's name.
type renamed struct {
	os.FileInfo
	name string
}

func (r renamed) Name() string { return r.name }
