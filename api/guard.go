package api

import (
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// Browsers (docs/http.md "Browsers and CSRF"). A web page the user opens
// can reach a loopback port, so every request a browser may have sent is
// held to the browser's own rules, while local services (which send no
// Origin and no Sec-Fetch-*) are untouched:
//
//   - Host: a Host that is not localhost, an IP literal, this machine's
//     own name or an allowed host is refused unless the request carries
//     the API token (DNS rebinding: a page whose own name now resolves to
//     the node's address would otherwise read the answers).
//   - Origin: a request carrying an Origin is served only for the node's
//     own origin (the page the node or its proxy serves) or an origin in
//     Config.CORSOrigins; a browser request without Origin only when the
//     browser says it is same-origin, typed by the user, or a top-level
//     read navigation (Sec-Fetch-Site, Sec-Fetch-Mode).
//   - A browser's write needs the API token, and an application/json or
//     no body type (the three types a page can send without a CORS
//     preflight are refused).

// Slugs of the browser checks.
const (
	SlugForbiddenHost        = "forbidden_host"
	SlugForbiddenOrigin      = "forbidden_origin"
	SlugUnsupportedMediaType = "unsupported_media_type"
)

// isLoopbackHost reports whether host (a Host header or an Origin's host,
// with or without a port) is "localhost" or a loopback IP literal. Only the
// exact name: anything else is resolved by DNS, which a page's owner may
// control.
func isLoopbackHost(host string) bool {
	h := hostOnly(host)
	if strings.EqualFold(strings.TrimSuffix(h, "."), "localhost") { // "localhost." is the same name
		return true
	}
	a, err := netip.ParseAddr(h) // no allocation: this runs on every request
	return err == nil && a.Unmap().IsLoopback()
}

// isIPLiteral reports whether host names an address, not a name: a page
// can be served from an address only by whoever holds it, so an address is
// never a rebinding vector.
func isIPLiteral(host string) bool {
	_, err := netip.ParseAddr(hostOnly(host))
	return err == nil
}

// hostOnly strips the port from host[:port] or [ipv6][:port].
func hostOnly(host string) string {
	if strings.HasPrefix(host, "[") {
		if i := strings.IndexByte(host, ']'); i > 0 {
			return host[1:i]
		}
		return host
	}
	if strings.Count(host, ":") == 1 {
		h, _, _ := strings.Cut(host, ":")
		return h
	}
	return host // a name, an IPv4 literal, or a bare IPv6 literal
}

// AnyHost in Config.AllowedHosts turns the Host check off.
const AnyHost = "*"

// machineNames are the names this machine answers to without DNS a page's
// owner controls: its host name (from /etc/hosts or the container runtime)
// and, for a full domain name, its first label (the search domain's short
// name), and the LAN's mDNS name (first label + .local, what avahi and
// Bonjour publish). None when unknown.
func machineNames() []string {
	h, err := os.Hostname()
	if err != nil {
		return nil
	}
	return namesOf(h)
}

func namesOf(h string) []string {
	h = strings.TrimSuffix(h, ".")
	if h == "" || strings.EqualFold(h, "localhost") {
		return nil
	}
	short, _, _ := strings.Cut(h, ".")
	if short == "" {
		return []string{h}
	}
	names := []string{h}
	if short != h {
		names = append(names, short)
	}
	if mdns := short + ".local"; !strings.EqualFold(mdns, h) {
		names = append(names, mdns)
	}
	return names
}

// allowedHost reports whether the Host header may be served: a known name,
// or any with AnyHost.
func (s *Server) allowedHost(host string) bool {
	return s.anyHost || s.knownHost(host)
}

// knownHost reports whether host is a name no page's owner can point at
// this node: empty (HTTP/1.0), localhost, an address, the machine's own
// names, or one of Config.AllowedHosts. AnyHost does not make a name known.
func (s *Server) knownHost(host string) bool {
	if host == "" || isLoopbackHost(host) || isIPLiteral(host) || s.extraHost(host) {
		return true
	}
	h := strings.TrimSuffix(hostOnly(host), ".")
	for _, m := range s.machine {
		if strings.EqualFold(m, h) {
			return true
		}
	}
	return false
}

// extraHost reports whether host's name is one of Config.AllowedHosts.
func (s *Server) extraHost(host string) bool {
	h := strings.TrimSuffix(hostOnly(host), ".")
	for _, a := range s.cfg.AllowedHosts {
		if strings.EqualFold(strings.TrimSuffix(a, "."), h) { // "media.example.org." is the same name
			return true
		}
	}
	return false
}

// browserMarked reports whether a browser may have sent r: every current
// browser sends Origin on a cross-origin request and on any write, and
// Sec-Fetch-* on every request.
func browserMarked(r *http.Request) bool {
	h := r.Header
	return len(h["Origin"]) > 0 || h.Get("Sec-Fetch-Site") != "" || h.Get("Sec-Fetch-Mode") != ""
}

// checkOrigin applies the Origin rule to a request a browser may have
// sent. It returns the origin to answer with CORS headers ("" for none).
func (s *Server) checkOrigin(r *http.Request) (cors string, err error) {
	if v, ok := r.Header["Origin"]; ok {
		o := ""
		if len(v) > 0 {
			o = v[0]
		}
		switch {
		case s.corsOrigin(o):
			return o, nil
		case s.ownOrigin(o, r.Host):
			return "", nil
		}
		return "", &Error{Status: http.StatusForbidden, Slug: SlugForbiddenOrigin,
			Message: "a request from the web origin " + quote(o) + " is refused: only pages this node serves (on " + quote(r.Host) +
				") and the origins in cors-origins may use it (local services send no Origin)"}
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none": // none: typed or bookmarked by the user
		return "", nil
	default:
		// A cross-site page's no-cors read (img, script, video) or a
		// navigation: only a top-level read navigation is served (a link
		// the user follows; the page that linked cannot read the answer).
		if safeMethod(r.Method) && r.Header.Get("Sec-Fetch-Mode") == "navigate" && r.Header.Get("Sec-Fetch-Dest") == "document" {
			return "", nil
		}
		return "", &Error{Status: http.StatusForbidden, Slug: SlugForbiddenOrigin,
			Message: "a " + site + " request from a web page is refused: only pages this node serves and the origins in cors-origins may use it"}
	}
}

// ownOrigin: a page served by this node, on the name or address the
// request went to, or on one of Config.AllowedHosts (a reverse proxy that
// passes its upstream's address as Host). Not a page on a name that only
// AnyHost lets in: that is exactly what a rebinding page presents (Origin
// http://evil.example:9000, Host evil.example:9000). "null" (a sandboxed
// page, a file, anything this node serves) is foreign.
func (s *Server) ownOrigin(origin, reqHost string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.Path != "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	if s.extraHost(u.Host) {
		return true
	}
	return s.knownHost(reqHost) && sameHostPort(u, reqHost)
}

// sameHostPort reports whether the origin u names the host and port of a
// Host header (a missing port is the scheme's default).
func sameHostPort(u *url.URL, reqHost string) bool {
	def := "80"
	if u.Scheme == "https" {
		def = "443"
	}
	port := func(p string) string {
		if p == "" {
			return def
		}
		return p
	}
	h, p := hostOnly(reqHost), ""
	if len(h) < len(reqHost) {
		if i := strings.LastIndexByte(reqHost, ':'); i >= 0 && !strings.HasSuffix(reqHost, "]") {
			p = reqHost[i+1:]
		}
	}
	return strings.EqualFold(strings.TrimSuffix(u.Hostname(), "."), strings.TrimSuffix(h, ".")) && port(u.Port()) == port(p)
}

// corsOrigin reports whether origin is one of Config.CORSOrigins (scheme,
// host and port compared as browsers send them: lower case, no path).
func (s *Server) corsOrigin(origin string) bool {
	for _, o := range s.cfg.CORSOrigins {
		if strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	return false
}

// checkBodyType: a browser's write names application/json or no type;
// text/plain, forms and multipart are what a page sends without asking.
func checkBodyType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return &Error{Status: http.StatusUnsupportedMediaType, Slug: SlugUnsupportedMediaType,
			Message: "Content-Type " + quote(ct) + " is refused: send application/json (or no Content-Type)"}
	}
	return nil
}

// safeMethod: the methods that change nothing on any route.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions || m == "PROPFIND"
}

// quote quotes a header value for a message, cut to a readable length.
func quote(s string) string {
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strconv.Quote(s)
}

// forbiddenHost is the answer to a request whose Host is not one this
// server knows.
func (s *Server) forbiddenHost(r *http.Request) error {
	names := append([]string{"localhost", "IP addresses"}, s.machine...)
	return &Error{Status: http.StatusForbidden, Slug: SlugForbiddenHost,
		Message: "Host " + quote(r.Host) + " is refused: this API answers only to " + strings.Join(names, ", ") +
			" and the names in http-allowed-hosts (a web page on another name reaching it is DNS rebinding); " +
			"to reach it by that name, add it: --http-allowed-hosts " + quote(hostOnly(r.Host)) +
			" or METANODE_HTTP_ALLOWED_HOSTS, or send the API token"}
}
