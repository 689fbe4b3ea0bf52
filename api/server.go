package api

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/webdav"

	"github.com/metanode/metanode/store"
)

// Defaults for Config fields left zero.
const (
	DefaultAddr            = "127.0.0.1:9000"
	DefaultKeepAlive       = 30 * time.Second // SSE heartbeat after this much silence
	DefaultShutdownTimeout = 10 * time.Second // drain of in-flight requests on Close
	DefaultSSEWriteTimeout = 30 * time.Second // a stream write stuck this long ends the stream
)

// Config configures a Server. Zero fields take the documented defaults.
type Config struct {
	Addr string // listen address; default DefaultAddr ("127.0.0.1:0" in tests)
	// Listener, when set, is served instead of listening on Addr (socket
	// activation, tests); Close closes it.
	Listener  net.Listener
	Store     Store  // required
	Node      Node   // required
	FilesRoot string // the only directory GET /file/{cid} serves from; "" serves nothing

	// AllowedHosts are host names (no port) this server answers to besides
	// localhost, IP literals and the machine's own host name, and whose
	// pages may write: a reverse proxy that passes the browser's Host
	// ("media.example.org"), or a container's service name ("metanode").
	// AnyHost ("*") answers every Host. See docs/http.md "Browsers and CSRF".
	AllowedHosts []string

	// LegacySigner, when set, signs the unsigned writes of the single-box
	// core's routes (PATCH /meta/{h}, …; legacy.go): the node's legacy
	// writer key. nil refuses them with 410 gone (legacy-writes: refuse).
	LegacySigner *store.Signer

	// WebDAVWrites lets WebDAV clients write under the files root's
	// plugin/ (webdav-writes); without it /webdav/ is read-only.
	WebDAVWrites bool

	// BaseURL is the external URL consumers are told in GET /urls
	// ("baseUrl"); default the URL the request came in on.
	BaseURL string

	// Who may use the API (access.go, docs/http.md "Who may use the API").
	// Socket, when set, is a Unix socket path served besides Addr (made
	// 0600; every caller on it is local). LocalNetworks are the prefixes
	// whose direct callers are local, as loopback is. Token is the API
	// token ("" none) and TokenFile where it lives, named in messages.
	// CORSOrigins are the browser origins (scheme://host[:port]) answered
	// with CORS headers; none by default.
	Socket        string
	LocalNetworks []netip.Prefix
	Token         string
	TokenFile     string
	CORSOrigins   []string

	// GUIUser and GUIPassword (a bcrypt hash) let a browser beyond
	// loopback open the owner's page and get the token (ui.go); both or
	// neither. Without them the page is served on loopback only.
	GUIUser     string
	GUIPassword string

	// BodyBudget bounds the request body bytes in flight across all
	// requests (budget.go); default DefaultBodyBudget. BodyWait is how long
	// a request waits for room before 503 busy; default DefaultBodyWait.
	BodyBudget int64
	BodyWait   time.Duration

	Logger     *slog.Logger          // default slog.Default()
	Registerer prometheus.Registerer // the api's metrics; nil: a private registry
	Gatherer   prometheus.Gatherer   // what /metrics serves; nil: the Registerer when it is a Gatherer, else the private registry

	KeepAlive       time.Duration // default DefaultKeepAlive
	ShutdownTimeout time.Duration // default DefaultShutdownTimeout
	SSEWriteTimeout time.Duration // default DefaultSSEWriteTimeout
}

// Server is the HTTP server. NewServer does no I/O; Open listens and serves
// on its own goroutine; Close stops accepting, ends SSE streams and drains
// in-flight requests (bounded by ShutdownTimeout).
type Server struct {
	cfg     Config
	log     *slog.Logger
	mux     *http.ServeMux
	metrics *metrics
	gather  prometheus.Gatherer
	initErr error
	legacy  *legacyWriter   // nil: legacy writes are refused
	webdav  *webdav.Handler // the files root over WebDAV; nil without one
	unclean http.Handler    // a path the mux would redirect (see ServeHTTP)
	refused http.Handler    // a request admit refused: the error is in its context

	// readOnly are the patterns registered with handleOpen: a non-safe
	// method on them changes nothing (access.go). tokenSum is the API
	// token's SHA-256, nil without one. bodies is the body budget.
	readOnly map[string]bool
	tokenSum *[32]byte
	bodies   *bodyBudget
	gui      *guiLogin // the GUI user and password; nil without

	// anyHost: Config.AllowedHosts holds AnyHost, the Host check is off.
	// machine: this machine's own names, answered as Host (guard.go); set
	// in Open, before the first request.
	anyHost bool
	machine []string

	mu       sync.Mutex
	handlers sync.WaitGroup // requests in a handler: Close waits for them
	srv      *http.Server
	ln       net.Listener
	sock     net.Listener  // the Unix socket, when Config.Socket is set
	done     chan struct{} // closed when the serve goroutines return

	// streams ends SSE streams first on Close; base is every request's
	// context and is cancelled only after the drain, so a write in flight
	// still completes.
	streams       context.Context
	cancelStreams context.CancelCauseFunc
	base          context.Context
	cancelBase    context.CancelCauseFunc
	closeOnce     sync.Once
}

// NewServer returns an unopened server with its routes.
func NewServer(cfg Config) *Server {
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = DefaultKeepAlive
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.SSEWriteTimeout <= 0 {
		cfg.SSEWriteTimeout = DefaultSSEWriteTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.FilesRoot != "" {
		if abs, err := filepath.Abs(cfg.FilesRoot); err == nil {
			cfg.FilesRoot = abs
		}
	}
	if cfg.BodyBudget <= 0 {
		cfg.BodyBudget = DefaultBodyBudget
	}
	cfg.BodyBudget = max(cfg.BodyBudget, MaxClaimsBody) // the largest body must fit
	if cfg.BodyWait <= 0 {
		cfg.BodyWait = DefaultBodyWait
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "api"), mux: http.NewServeMux(), readOnly: make(map[string]bool)}
	if cfg.Token != "" {
		sum := sha256.Sum256([]byte(cfg.Token))
		s.tokenSum = &sum
	}
	reg, gather := cfg.Registerer, cfg.Gatherer
	if reg == nil {
		private := prometheus.NewRegistry()
		reg = private
		if gather == nil {
			gather = private
		}
	}
	if gather == nil {
		if g, ok := reg.(prometheus.Gatherer); ok {
			gather = g
		} else {
			gather = prometheus.NewRegistry() // serves an empty page rather than nothing
		}
	}
	s.gather = gather
	s.metrics, s.initErr = newMetrics(reg)
	if s.initErr != nil {
		s.metrics, _ = newMetrics(nil) // keep the server usable for Open to report
	}
	if gui, err := newGUILogin(cfg.GUIUser, cfg.GUIPassword); err != nil {
		s.initErr = cmp.Or(s.initErr, err)
	} else {
		s.gui = gui
	}
	s.bodies = newBodyBudget(cfg.BodyBudget, cfg.BodyWait, s.metrics.bodyBytes)
	s.anyHost = slices.Contains(cfg.AllowedHosts, AnyHost)
	if cfg.LegacySigner != nil {
		s.legacy = &legacyWriter{signer: cfg.LegacySigner}
	}
	if cfg.FilesRoot != "" {
		s.webdav = newWebDAV(cfg.FilesRoot, cfg.WebDAVWrites)
	}
	s.streams, s.cancelStreams = context.WithCancelCause(context.Background())
	s.base, s.cancelBase = context.WithCancelCause(context.Background())
	s.routes()
	return s
}

// Open listens on Config.Addr and serves on its own goroutine. ctx bounds
// only the listen.
func (s *Server) Open(ctx context.Context) error {
	if s.initErr != nil {
		return fmt.Errorf("open api: %w", s.initErr)
	}
	if s.cfg.Store == nil || s.cfg.Node == nil {
		return errors.New("open api: Config.Store and Config.Node are required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return errors.New("open api: already open")
	}
	if s.base.Err() != nil {
		return fmt.Errorf("open api: %w", ErrClosed)
	}
	ln := s.cfg.Listener
	if ln == nil {
		var lc net.ListenConfig
		var err error
		if ln, err = lc.Listen(ctx, "tcp", s.cfg.Addr); err != nil {
			return fmt.Errorf("open api: %w", err)
		}
	}
	if beyondLoopback(ln.Addr()) && s.cfg.Token == "" && len(s.cfg.LocalNetworks) == 0 {
		_ = ln.Close()
		return fmt.Errorf("open api: %w", &ExposedError{Addr: ln.Addr().String()})
	}
	if s.cfg.Socket != "" {
		sock, err := listenSocket(ctx, s.cfg.Socket)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("open api: %w", err)
		}
		s.sock = sock
	}
	s.ln = ln
	s.machine = machineNames()
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second, // SSE and file downloads lift it per request
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return s.base },
		ConnContext:       markSocket,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.done = make(chan struct{})
	srv := s.srv
	var loops sync.WaitGroup
	for _, l := range []net.Listener{ln, s.sock} {
		if l == nil {
			continue
		}
		loops.Go(func() { // a server loop per listener, ended by Close
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("http server stopped", "listener", l.Addr().String(), "err", err)
			}
		})
	}
	go func() { loops.Wait(); close(s.done) }()
	s.log.Info("api listening", "url", s.urlLocked(), "socket", s.cfg.Socket)
	if beyondLoopback(ln.Addr()) {
		s.log.Warn("the API listens beyond loopback: callers from other addresses get only GET /health unless they send the API token or their network is declared local",
			"addr", ln.Addr().String(), "token", s.tokenFile(), "localNetworks", prefixStrings(s.cfg.LocalNetworks))
		if s.gui == nil {
			s.log.Warn("the owner's page is served on loopback only: set gui-user and gui-password ('metanode gui-password' makes the hash) to open it from other machines")
		}
	}
	return nil
}

// URL returns the base URL the server listens on ("" before Open).
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.urlLocked()
}

func (s *Server) urlLocked() string {
	if s.ln == nil {
		return ""
	}
	return "http://" + s.ln.Addr().String()
}

// Handler returns the routed handler (CORS, metrics and error envelope
// included), for embedding without Open.
func (s *Server) Handler() http.Handler { return s }

// ErrDrainCut is Close's error when requests still running after
// ShutdownTimeout were cut (a slow upload, a long /file download).
var ErrDrainCut = errors.New("close api: drain: requests still running after the shutdown timeout were cut")

// Close stops accepting connections, ends SSE streams, and waits up to
// ShutdownTimeout for in-flight requests before cutting them. A second call
// returns ErrClosed.
func (s *Server) Close() error {
	first := false
	s.closeOnce.Do(func() { first = true })
	if !first {
		return ErrClosed
	}
	s.cancelStreams(ErrClosed)
	s.mu.Lock()
	srv, done := s.srv, s.done
	s.mu.Unlock()
	var err error
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		if err = srv.Shutdown(ctx); err != nil {
			err = fmt.Errorf("%w: %w", ErrDrainCut, err)
			_ = srv.Close() // cut what did not finish in time
		}
		cancel()
	}
	s.cancelBase(ErrClosed)
	if done != nil {
		<-done
	}

	// A handler cut by srv.Close may still be running: its context is
	// cancelled now; give it a bounded moment to return.
	finished := make(chan struct{})
	go func() { s.handlers.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(s.cfg.ShutdownTimeout):
		s.log.Error("handlers still running after close")
	}
	return err
}

// ServeHTTP sets the headers every answer carries, normalises the path,
// admits the request (access.go: token, Host, origin, who may do what),
// answers CORS preflights, reserves room for the body (budget.go), then
// routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// Shared, never-modified values: no allocation per request. Nothing
	// this node serves may run as a page of its origin (a library file
	// would otherwise be one): sandbox makes any document an opaque
	// origin, which no check here lets in. A page the node means to serve
	// sets its own policy.
	h["Content-Security-Policy"] = cspSandbox
	h["X-Content-Type-Options"] = nosniff
	h["Cross-Origin-Resource-Policy"] = corpSameOrigin
	p := r.URL.Path
	if len(p) > 1 && p[len(p)-1] == '/' {
		// A trailing slash is a common artefact of building URLs: serve
		// the route without it, on every route alike.
		r = r.Clone(r.Context())
		r.URL.Path = p[:len(p)-1]
		r.URL.RawPath = strings.TrimSuffix(r.URL.RawPath, "/")
		p = r.URL.Path
	}
	c, cors, err := s.admit(r)
	if cors != "" {
		h["Access-Control-Allow-Origin"] = []string{cors}
		h["Vary"] = varyOrigin
		h["Access-Control-Allow-Methods"] = corsMethods
		h["Access-Control-Allow-Headers"] = corsHeaders
		h["Access-Control-Max-Age"] = corsMaxAge
	}
	if err != nil {
		if e, ok := err.(*Error); ok && e.Status == http.StatusUnauthorized {
			h.Set("WWW-Authenticate", `Bearer realm="metanode"`)
		}
		s.refused.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), refusalKey{}, err)))
		return
	}
	if r.Method == http.MethodOptions && !s.isWebDAV(p) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	release, err := s.bodies.reserve(r)
	if err != nil {
		h.Set("Retry-After", "1")
		s.refused.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), refusalKey{}, err)))
		return
	}
	defer release()
	r = r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
	if p != "" && cleanPath(p) != p {
		// The mux would answer 307 to the cleaned path with an HTML body;
		// a redirect could also read another key than the one asked
		// (cast//0 → cast/0). Answer in the envelope instead.
		s.unclean.ServeHTTP(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// refusalKey carries admit's or the budget's refusal to s.refused.
type refusalKey struct{}

func handleRefused(w http.ResponseWriter, r *http.Request) error {
	return r.Context().Value(refusalKey{}).(error)
}

// isWebDAV reports whether p is under /webdav/ on a server that serves it
// (its OPTIONS answer names the DAV class, as clients ask).
func (s *Server) isWebDAV(p string) bool {
	return s.webdav != nil && (p == WebDAVPrefix || strings.HasPrefix(p, WebDAVPrefix+"/"))
}

// cleanPath is the form net/http's mux redirects to: rooted, with no
// empty, "." or ".." segment.
func cleanPath(p string) string {
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	return path.Clean(p)
}

// Headers of every answer, and CORS for an origin in Config.CORSOrigins
// (Authorization for the token, Last-Event-ID so a page can resume a
// stream).
var (
	cspSandbox     = []string{"sandbox"}
	nosniff        = []string{"nosniff"}
	corpSameOrigin = []string{"same-origin"}
	varyOrigin     = []string{"Origin"}
	corsMethods    = []string{"GET, POST, PUT, PATCH, DELETE, OPTIONS"}
	corsHeaders    = []string{"Authorization, Content-Type, Last-Event-ID"}
	corsMaxAge     = []string{"600"}
)

// handlerFunc is a route handler: it writes its answer, or returns an error
// that becomes the error envelope.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle registers h for pattern with its metrics and error mapping. A
// pattern whose method is not GET, HEAD or OPTIONS is a write: from a
// browser it needs the API token (access.go).
func (s *Server) handle(pattern string, h handlerFunc) {
	s.mux.Handle(pattern, s.wrap(s.metrics.forRoute(pattern), h))
}

// handleOpen registers h as a route that changes nothing whatever its
// method: a POST that only reads (search, merge), a removed route that
// only answers 410. A browser may use it without the token.
func (s *Server) handleOpen(pattern string, h handlerFunc) {
	s.readOnly[pattern] = true
	s.handle(pattern, h)
}

func (s *Server) wrap(rm *routeMetrics, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.handlers.Add(1)
		defer s.handlers.Done()
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		err := h(sw, r)
		if err != nil {
			s.writeError(sw, r, err)
		}
		rm.observe(sw.status(), time.Since(start), sw.stream)
	})
}

// writeError writes the envelope for err unless the answer already started.
func (s *Server) writeError(sw *statusWriter, r *http.Request, err error) {
	var we writtenError
	if errors.As(err, &we) {
		s.log.Debug("client went away", "method", r.Method, "path", r.URL.Path, "err", err)
		return
	}
	if sw.code != 0 { // the answer started: too late for an envelope
		s.log.Warn("request failed after answering", "method", r.Method, "path", r.URL.Path, "err", err)
		return
	}
	e := errorFor(err)
	switch {
	case errors.Is(err, context.Canceled): // the client went away, or shutdown
		s.log.Debug("request cancelled", "method", r.Method, "path", r.URL.Path, "err", err)
	case searchRefusal(err): // counted in the store's metrics
		s.log.Debug("search refused", "method", r.Method, "path", r.URL.Path, "err", err)
	case e.Slug == SlugBusy:
		s.log.Debug("request refused: body budget", "method", r.Method, "path", r.URL.Path)
	case e.Status == http.StatusServiceUnavailable:
		s.log.Warn("request refused: storage unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
	case e.Status >= 500:
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", e.Status, "err", err)
	default:
		s.log.Debug("request refused", "method", r.Method, "path", r.URL.Path, "status", e.Status, "err", err)
	}
	if e.Status == http.StatusServiceUnavailable && sw.Header().Get("Retry-After") == "" {
		sw.Header().Set("Retry-After", "5")
	}
	_ = writeJSON(sw, e.Status, e)
}

// statusWriter records the status code for metrics and for writeError.
type statusWriter struct {
	http.ResponseWriter
	code   int
	stream bool // an SSE stream: no latency observation
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// Unwrap lets http.ResponseController reach Flush and the deadlines.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ReadFrom keeps sendfile for GET /file/{cid}.
func (w *statusWriter) ReadFrom(src io.Reader) (int64, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	return io.Copy(w.ResponseWriter, src)
}
