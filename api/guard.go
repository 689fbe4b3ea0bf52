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

// Browsers and CSRF (docs/http.md "Browsers and CSRF"). The API has no
// login: anything that can reach the port may use it. A web page the user
// opens can reach a loopback port too, so three checks keep pages out
// while leaving local services (which send no Origin) untouched:
//
//   - Host: a Host that is not localhost, an IP literal, this machine's
//     own name or an allowed host is refused, on any listener (DNS
//     rebinding: a page whose own name now resolves to the node's address
//     would otherwise read the answers).
//   - Origin: a write carrying an Origin that is neither loopback, nor an
//     allowed host, nor the very address the request went to is refused (a
//     page on another site, or a rebinding page).
//   - Content-Type: a browser's write (it has Origin or Sec-Fetch-*) has an
//     application/json or no body type; the three types a page can send
//     without a CORS preflight (text/plain, form, multipart) are refused.

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

// allowedHost reports whether the Host header may be served.
func (s *Server) allowedHost(host string) bool {
	if host == "" || s.anyHost || isLoopbackHost(host) || isIPLiteral(host) || s.extraHost(host) {
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

// checkWrite applies the Origin and Content-Type checks to a request that
// changes state.
func (s *Server) checkWrite(r *http.Request) error {
	if origin, ok := r.Header["Origin"]; ok {
		o := ""
		if len(origin) > 0 {
			o = origin[0]
		}
		if !s.allowedOrigin(o, r.Host) {
			return &Error{Status: http.StatusForbidden, Slug: SlugForbiddenOrigin,
				Message: "a write from the web origin " + quote(o) + " is refused: only pages on this host's loopback or on " +
					quote(r.Host) + " itself may write (local services send no Origin)"}
		}
	}
	// Only requests a browser may have sent: a page's cross-site POST
	// always carries Origin (and Sec-Fetch-*). Local scripts that post
	// JSON without naming it (Python's urllib, Node's fetch of a string,
	// curl -d) are left alone.
	browser := r.Header.Get("Origin") != "" || r.Header.Get("Sec-Fetch-Site") != "" || r.Header.Get("Sec-Fetch-Mode") != ""
	if ct := r.Header.Get("Content-Type"); browser && ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return &Error{Status: http.StatusUnsupportedMediaType, Slug: SlugUnsupportedMediaType,
				Message: "Content-Type " + quote(ct) + " is refused: send application/json (or no Content-Type)"}
		}
	}
	return nil
}

// allowedOrigin: a loopback page, one of Config.AllowedHosts, or a page on
// the address the request was sent to. Not a page on the *name* the
// request was sent to: that is exactly what a rebinding page presents
// (Origin http://evil.example:9000, Host evil.example:9000) where the Host
// check is off (AllowedHosts "*"). "null" (a sandboxed page, a file) is
// foreign.
func (s *Server) allowedOrigin(origin, reqHost string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return isLoopbackHost(u.Host) || s.extraHost(u.Host) || (isIPLiteral(u.Host) && strings.EqualFold(u.Host, reqHost))
}

// quote quotes a header value for a message, cut to a readable length.
func quote(s string) string {
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strconv.Quote(s)
}

// forbiddenHost answers a request whose Host is not one this server knows.
func (s *Server) forbiddenHost(w http.ResponseWriter, r *http.Request) error {
	names := append([]string{"localhost", "IP addresses"}, s.machine...)
	return &Error{Status: http.StatusForbidden, Slug: SlugForbiddenHost,
		Message: "Host " + quote(r.Host) + " is refused: this API answers only to " + strings.Join(names, ", ") +
			" and the names in http-allowed-hosts (a web page on another name reaching it is DNS rebinding); " +
			"to reach it by that name, add it: --http-allowed-hosts " + quote(hostOnly(r.Host)) +
			" or METANODE_HTTP_ALLOWED_HOSTS"}
}
