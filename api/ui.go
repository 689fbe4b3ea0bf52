package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync/atomic"

	"golang.org/x/crypto/bcrypt"
)

// The owner's page (docs/http.md "The owner's page"): plain HTML, CSS and
// JavaScript modules embedded in the binary, served at / and /ui/…. It
// uses the API like any client; it writes with the API token, which
// GET /api/token hands it (access.go, tokenAllowed).
//
// Who gets the page and the token: a browser on loopback or the Unix
// socket (straight, no proxy header); anyone else only with the GUI
// user and password (Config.GUIUser, Config.GUIPassword: HTTP Basic,
// the password checked against a bcrypt hash). Without a password the
// page is refused beyond loopback, saying how to set one.

//go:embed ui
var uiFiles embed.FS

// uiFS is the ui directory itself.
var uiFS, _ = fs.Sub(uiFiles, "ui")

// pageCSP is the page's own policy in place of the default sandbox: its
// scripts and styles from this origin only, nothing inline, no frames,
// no forms, fetches to this origin only; images from this origin and the
// blob: URLs the page makes of the QR code it fetches.
var pageCSP = []string{"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"}

// handlePage serves the page itself (GET /).
func (s *Server) handlePage(w http.ResponseWriter, r *http.Request) error {
	if err := s.pageAllowed(w, r); err != nil {
		return err
	}
	return s.serveUI(w, r, "index.html")
}

// handleUIAsset serves the page's scripts, styles and icon: public,
// like the source they come from; they carry no data of the node.
func (s *Server) handleUIAsset(w http.ResponseWriter, r *http.Request) error {
	return s.serveUI(w, r, r.PathValue("file"))
}

func (s *Server) serveUI(w http.ResponseWriter, r *http.Request, name string) error {
	name = path.Clean(name)
	b, err := fs.ReadFile(uiFS, name)
	if err != nil || strings.HasPrefix(name, ".") {
		return errorf(http.StatusNotFound, "no such page file: %s", name)
	}
	h := w.Header()
	ct := mime.TypeByExtension(path.Ext(name))
	if strings.HasSuffix(name, ".js") {
		ct = "text/javascript; charset=utf-8" // whatever the system's mime table says
	}
	h.Set("Content-Type", ct)
	h["Content-Security-Policy"] = pageCSP
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache") // revalidated: a new binary serves new files
	h.Set("ETag", uiETag)
	if r.Header.Get("If-None-Match") == uiETag {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	_, err = w.Write(b)
	return errWritten(err)
}

// uiETag names the embedded files' content: one tag for all of them.
var uiETag = func() string {
	sum := sha256.New()
	_ = fs.WalkDir(uiFS, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := fs.ReadFile(uiFS, p)
			fmt.Fprintf(sum, "%s\x00%d\x00", p, len(b))
			sum.Write(b)
		}
		return err
	})
	return fmt.Sprintf(`"%x"`, sum.Sum(nil)[:12])
}()

// loopbackCaller reports whether r came straight from loopback or the
// Unix socket: the owner at the machine, who needs no password.
func (s *Server) loopbackCaller(r *http.Request) bool {
	a, sock, ok := straight(r)
	return ok && (sock || a.IsLoopback())
}

// ErrNoGUIPassword: the page was asked for from beyond loopback and no
// GUI password is set.
var ErrNoGUIPassword = errors.New("the owner's page is served beyond loopback only with a password")

// pageAllowed is the one rule for who gets the page and the token: a
// caller on loopback or the socket, or one with the GUI user and password.
// A refusal asks the browser for the password (401 Basic), or, with none
// set, says how to set one (403).
func (s *Server) pageAllowed(w http.ResponseWriter, r *http.Request) error {
	if s.loopbackCaller(r) {
		return nil
	}
	if s.gui == nil {
		return &Error{Status: http.StatusForbidden, Slug: SlugForbidden, err: ErrNoGUIPassword,
			Message: ErrNoGUIPassword.Error() + ": set gui-user and gui-password (a bcrypt hash: 'metanode gui-password' makes one) in the config and restart, or open the page on the machine itself (http://127.0.0.1:<port>/, or an ssh tunnel)"}
	}
	if user, pass, ok := r.BasicAuth(); ok && s.gui.check(user, pass) {
		return nil
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="metanode", charset="UTF-8"`)
	return &Error{Status: http.StatusUnauthorized, Slug: SlugUnauthorized, Message: "the owner's page asks for the GUI user and password (gui-user, gui-password)"}
}

// guiLogin checks the GUI user and password. bcrypt is slow on purpose:
// one check runs at a time (a flood of guesses costs one core at most),
// and the last good pair is remembered by its digest so a page load's
// second request does not pay again.
type guiLogin struct {
	user string
	hash []byte
	sem  chan struct{}
	good atomic.Pointer[[32]byte]
}

// newGUILogin checks the configuration: both or neither, and a bcrypt hash.
func newGUILogin(user, hash string) (*guiLogin, error) {
	switch {
	case user == "" && hash == "":
		return nil, nil
	case user == "" || hash == "":
		return nil, errors.New("gui-user and gui-password go together: set both, or neither")
	}
	if _, err := bcrypt.Cost([]byte(hash)); err != nil {
		return nil, fmt.Errorf("gui-password is not a bcrypt hash (%v): make one with 'metanode gui-password'", err)
	}
	return &guiLogin{user: user, hash: []byte(hash), sem: make(chan struct{}, 1)}, nil
}

func (g *guiLogin) check(user, pass string) bool {
	sum := sha256.Sum256([]byte(user + "\x00" + pass))
	if good := g.good.Load(); good != nil && subtle.ConstantTimeCompare(good[:], sum[:]) == 1 {
		return true
	}
	g.sem <- struct{}{}
	defer func() { <-g.sem }()
	okUser := subtle.ConstantTimeCompare([]byte(user), []byte(g.user)) == 1
	okPass := bcrypt.CompareHashAndPassword(g.hash, []byte(pass)) == nil
	if okUser && okPass {
		g.good.Store(&sum)
		return true
	}
	return false
}
