package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Who may use the API (docs/http.md "Who may use the API"). A request is
// local when it carries the API token, came in on the Unix socket, or came
// straight (no proxy header) from a loopback address or a network declared
// local (Config.LocalNetworks). Local callers may do everything; others get
// GET /health and CORS preflights, and 401 for the rest. A browser's
// write needs the token whatever its address: a page never holds
// the token unless this node handed it to a page of its own.

// SlugUnauthorized: a caller that is not local and sent no token.
const SlugUnauthorized = "unauthorized"

// caller is what the server knows of who sent a request.
type caller struct {
	token   bool // carried this node's API token
	local   bool // the token, the Unix socket, loopback or a local network
	browser bool // Origin or Sec-Fetch-* present
	byAddr  bool // local by where it came from, token aside
}

type callerKey struct{}
type socketKey struct{}

// LocalCaller reports whether the request whose context ctx is came from a
// local caller (docs/http.md "Who may use the API"). A context that did not
// come through the server (an in-process call) is local.
func LocalCaller(ctx context.Context) bool {
	c, ok := ctx.Value(callerKey{}).(caller)
	return !ok || c.local
}

// tokenState is what a request's Authorization header says.
type tokenState int

const (
	tokenNone tokenState = iota // no Bearer credentials
	tokenGood                   // this node's token
	tokenBad                    // a token, not this node's
)

// bearer checks the request's Authorization: Bearer credentials against
// the token, in constant time (both sides hashed: lengths leak nothing).
func (s *Server) bearer(r *http.Request) tokenState {
	v := r.Header.Get("Authorization")
	if v == "" {
		return tokenNone
	}
	scheme, cred, _ := strings.Cut(v, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return tokenNone
	}
	if s.tokenSum == nil {
		return tokenBad
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(cred)))
	if subtle.ConstantTimeCompare(got[:], s.tokenSum[:]) == 1 {
		return tokenGood
	}
	return tokenBad
}

// proxyHeaders name a request relayed by a proxy: its address is the
// proxy's, not the caller's, so it is never local by address.
var proxyHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Real-Ip"}

// straight is where r came from when it came straight (no proxy
// header): the Unix socket (sock), or a caller's address; ok is false
// for a relayed request or an address that does not parse.
func straight(r *http.Request) (a netip.Addr, sock, ok bool) {
	for _, h := range proxyHeaders {
		if len(r.Header[h]) > 0 {
			return a, false, false
		}
	}
	if r.Context().Value(socketKey{}) != nil {
		return a, true, true
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return a, false, false
	}
	return ap.Addr().Unmap().WithZone(""), false, true
}

// localAddr reports whether r came straight (no proxy header) from the
// Unix socket, loopback or a declared local network.
func (s *Server) localAddr(r *http.Request) bool {
	a, sock, ok := straight(r)
	if !ok || sock || a.IsLoopback() {
		return ok
	}
	for _, p := range s.cfg.LocalNetworks {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// admit decides whether r may be served, in this order: the token (a
// wrong one is refused), the Host check, the browser's origin rules, then
// who may use what. cors is the origin to answer with CORS headers, set
// on a refusal too once the origin is known to be allowed (its page may
// read why).
func (s *Server) admit(r *http.Request) (c caller, cors string, err error) {
	switch s.bearer(r) {
	case tokenGood:
		c.token = true
	case tokenBad:
		return c, "", s.unauthorized("the API token sent is not this node's: send the content of " + s.tokenFile())
	}
	if !c.token && !s.allowedHost(r.Host) {
		return c, "", s.forbiddenHost(r)
	}
	if c.browser = browserMarked(r); c.browser {
		if cors, err = s.checkOrigin(r); err != nil {
			return c, "", err
		}
	}
	c.byAddr = s.localAddr(r)
	c.local = c.token || c.byAddr
	switch {
	case r.Method == http.MethodOptions, publicRoute(r), s.pageRoute(r):
		return c, cors, nil
	case !c.local:
		return c, cors, s.unauthorized("this API serves callers from other addresses only with the API token: send Authorization: Bearer <the content of " +
			s.tokenFile() + ">, or declare their network local (local-networks)")
	case c.browser && s.writes(r):
		if !c.token {
			return c, cors, s.unauthorized("a web page writes only with the API token (Authorization: Bearer …): this node's own pages get it from GET /api/token")
		}
		if err := checkBodyType(r); err != nil {
			return c, cors, err
		}
	}
	return c, cors, nil
}

// publicRoute: what any caller may read. Only liveness: a probe from
// another host or a container runtime needs it, and it names nothing.
func publicRoute(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.Path == "/health"
}

// pageRoute: the owner's page and its files, which decide themselves
// (pageAllowed), and GET /api/token once a GUI password is set, so that
// a browser beyond loopback may log in for it (tokenAllowed).
func (s *Server) pageRoute(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	p := r.URL.Path
	return p == "/" || strings.HasPrefix(p, "/ui/") || (s.gui != nil && p == "/api/token")
}

// writes reports whether r may change state: any method but the safe
// ones, unless its route was registered with handleOpen (a POST that only
// reads, a removed route that only answers 410).
func (s *Server) writes(r *http.Request) bool {
	if safeMethod(r.Method) {
		return false
	}
	_, pattern := s.mux.Handler(r)
	return !s.readOnly[pattern]
}

func (s *Server) tokenFile() string {
	if s.cfg.TokenFile != "" {
		return s.cfg.TokenFile
	}
	return "<data>/api.token"
}

func (s *Server) unauthorized(msg string) error {
	return &Error{Status: http.StatusUnauthorized, Slug: SlugUnauthorized, Message: msg}
}

// TokenResponse is the answer of GET /api/token.
type TokenResponse struct {
	Token string `json:"token"`
}

// handleToken hands the API token to a page this node serves, so that it
// can write: only to a browser's same-origin request (Sec-Fetch-Site:
// same-origin) on a name no page's owner can point here (the Host check
// without AnyHost), from a caller local by its address. A page on another
// origin cannot read the answer (no CORS) and is refused before it runs; a
// rebinding page fails the Host check. Behind a proxy, or from an address
// that is not local, the answer is 403: a login for such pages belongs in
// tokenAllowed.
func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Token == "" {
		return errorf(http.StatusNotFound, "this node has no API token")
	}
	if !s.tokenAllowed(r) {
		return &Error{Status: http.StatusForbidden, Slug: SlugForbiddenOrigin,
			Message: "the API token is handed only to this node's own page (a same-origin request from loopback, or with the GUI password); scripts read it from " + s.tokenFile()}
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusOK, TokenResponse{Token: s.cfg.Token})
}

// tokenAllowed is the one rule for who gets the token over HTTP: a
// browser's same-origin request on a known name (not through AnyHost: a
// rebinding page fails here) from the owner at the machine (loopback or
// the Unix socket, no proxy header) or with the GUI user and password
// (ui.go, pageAllowed: the same rule as for the page itself).
func (s *Server) tokenAllowed(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Site") != "same-origin" || !s.knownHost(r.Host) {
		return false
	}
	if s.loopbackCaller(r) {
		return true
	}
	user, pass, ok := r.BasicAuth()
	return ok && s.gui != nil && s.gui.check(user, pass)
}

// beyondLoopback reports whether a listener's address reaches past
// loopback (an unspecified or a non-loopback address).
func beyondLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return false // a Unix socket: the file's permissions decide
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	return !ok || !ip.Unmap().IsLoopback()
}
