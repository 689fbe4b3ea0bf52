package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	"golang.org/x/crypto/bcrypt"

	"github.com/metanode/metanode/api"
)

// Checks of the merged settings (config.go loads them).

// validateOne checks one setting's shape.
func (c *Config) validateOne(name string) error {
	if s := settingNamed(name); s != nil && s.check != nil {
		if msg := s.check(c); msg != "" {
			return &ConfigError{Field: s.name, Value: valueString(s.field(c)), Err: errors.New(msg)}
		}
	}
	return nil
}

// Validate checks every setting's shape (files are not opened here).
func (c *Config) Validate() error {
	for _, s := range settings {
		if s.check == nil {
			continue
		}
		if msg := s.check(c); msg != "" {
			return &ConfigError{Field: s.name, Value: valueString(s.field(c)), Err: errors.New(msg)}
		}
	}
	return nil
}

func valueString(p any) string {
	switch p := p.(type) {
	case *string:
		return *p
	case *[]string:
		return strings.Join(*p, ",")
	case *bool:
		return strconv.FormatBool(*p)
	case *int:
		return strconv.Itoa(*p)
	}
	return ""
}

func notEmpty(s string) string {
	if s == "" {
		return "must be set"
	}
	return ""
}

func oneOf(v string, allowed ...string) string {
	if slices.Contains(allowed, v) {
		return ""
	}
	return "must be one of " + strings.Join(allowed, ", ")
}

func checkHTTP(c *Config) string {
	host, port, err := net.SplitHostPort(c.HTTP)
	if err != nil {
		return "want host:port, e.g. 127.0.0.1:9000"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "port must be a number from 0 to 65535"
	}
	if host != "" && host != "localhost" && net.ParseIP(host) == nil {
		return "host must be an IP address or localhost"
	}
	return ""
}

// checkHostNames: names as a browser puts them in Host, without a port
// or scheme (api.Config.AllowedHosts compares names only), or "*".
func checkHostNames(c *Config) string {
	for _, h := range c.HTTPAllowed {
		ok := h != ""
		if h == api.AnyHost {
			continue
		}
		for _, r := range h {
			if !(r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				ok = false
			}
		}
		if !ok {
			return fmt.Sprintf("%q: want a host name without scheme or port, e.g. metanode or media.example.org, or * for any", h)
		}
	}
	return ""
}

// checkLocalNetworks: CIDRs (an address alone is its own /32 or /128),
// none of them every address: that would make the whole internet local.
func checkLocalNetworks(c *Config) string {
	for _, n := range c.LocalNetworks {
		p, err := parseNetwork(n)
		if err != nil {
			return fmt.Sprintf("%q: want a network in CIDR form, e.g. 192.168.1.0/24 or fd00::/64", n)
		}
		if p.Bits() == 0 {
			return fmt.Sprintf("%q declares every address local, which is no protection: name your network (e.g. 192.168.1.0/24), or give remote callers the API token", n)
		}
	}
	return ""
}

func parseNetwork(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, err
	}
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// localNetworks parses checked CIDRs.
func localNetworks(list []string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range list {
		if p, err := parseNetwork(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// checkCORSOrigins: origins as browsers send them, scheme://host[:port],
// never "*" (a page anywhere would read the library).
func checkCORSOrigins(c *Config) string {
	for _, o := range c.CORSOrigins {
		u, err := url.Parse(strings.TrimSuffix(o, "/"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil || u.Fragment != "" {
			return fmt.Sprintf("%q: want an origin scheme://host[:port], e.g. http://dash.lan:8080 (no path; * is not allowed)", o)
		}
	}
	return ""
}

// checkGUI: the owner's page login is both settings or neither.
func checkGUI(c *Config) string {
	if c.GUIUser == "" && c.GUIPassword != "" {
		return "gui-password is set without gui-user: set both, or neither"
	}
	return ""
}

// checkGUIPassword: a bcrypt hash, never the password itself (the config
// file may be read by more people than should know it).
func checkGUIPassword(c *Config) string {
	switch {
	case c.GUIPassword == "" && c.GUIUser != "":
		return "gui-user is set without gui-password: set both, or neither ('metanode gui-password' makes the hash)"
	case c.GUIPassword == "":
		return ""
	}
	if _, err := bcrypt.Cost([]byte(c.GUIPassword)); err != nil {
		return "want a bcrypt hash ($2a$…, $2b$…), not the password: 'metanode gui-password' makes one"
	}
	return ""
}

func checkListen(c *Config) string {
	if len(c.Listen) == 0 {
		return "give at least one multiaddr, e.g. /ip4/0.0.0.0/tcp/4821"
	}
	for _, a := range c.Listen {
		if _, err := ma.NewMultiaddr(a); err != nil {
			return fmt.Sprintf("%q is not a multiaddr: %v", a, err)
		}
	}
	return ""
}

func checkBootstrap(c *Config) string { return checkPeerAddrs(c.Bootstrap) }

func checkPeerAddrs(addrs []string) string {
	for _, a := range addrs {
		if _, err := peer.AddrInfoFromString(a); err != nil {
			return fmt.Sprintf("%q is not a multiaddr ending in /p2p/<peerId>: %v", a, err)
		}
	}
	return ""
}

func checkSwarmName(c *Config) string {
	if !validSwarmName(c.Swarm) {
		return "must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"
	}
	return ""
}

// validSwarmName: the name becomes part of topic and protocol names and
// is written into config files (where ${VAR} is expanded), so it keeps to
// a plain alphabet.
func validSwarmName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case i > 0 && (r == '.' || r == '_' || r == '-'):
		default:
			return false
		}
	}
	return true
}
