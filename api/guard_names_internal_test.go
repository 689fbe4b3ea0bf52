package api

import (
	"slices"
	"testing"
)

// The machine's names: a full domain name answers its short name and the
// mDNS name avahi and Bonjour publish (first label + .local), not the full
// name + .local that nothing publishes (review 8, R8-3).
func TestMachineNames(t *testing.T) {
	for _, tc := range []struct {
		host string
		want []string
	}{
		{"nas", []string{"nas", "nas.local"}},
		{"nas.example.lan", []string{"nas.example.lan", "nas", "nas.local"}},
		{"nas.example.lan.", []string{"nas.example.lan", "nas", "nas.local"}},
		{"nas.local", []string{"nas.local", "nas"}},
		{"localhost", nil},
		{"", nil},
		{".", nil},
	} {
		if got := namesOf(tc.host); !slices.Equal(got, tc.want) {
			t.Errorf("names of %q: %q, want %q", tc.host, got, tc.want)
		}
	}
}

// An allowed host written as an absolute name (trailing dot) is the same
// name (review 8, R8-4).
func TestExtraHost_TrailingDot(t *testing.T) {
	s := &Server{cfg: Config{AllowedHosts: []string{"media.example.org."}}}
	for _, h := range []string{"media.example.org", "media.example.org.", "MEDIA.example.org:443"} {
		if !s.extraHost(h) || !s.allowedHost(h) {
			t.Errorf("Host %s: not allowed by %q", h, s.cfg.AllowedHosts)
		}
	}
	if !s.ownOrigin("https://media.example.org", "127.0.0.1:9000") {
		t.Error("a page on the allowed host is not the node's own")
	}
}
