package node

import (
	"strings"
	"testing"

	"github.com/metanode/metanode/swarm"
)

// TestSwarmCheck: only a swarm with bootstrap peers, no peer connected and
// a reported problem is degraded; the check names the problem either way.
func TestSwarmCheck(t *testing.T) {
	mismatch := []string{"swarm key mismatch / cannot negotiate with 12D3… at /ip4/127.0.0.1/tcp/4001: …"}
	for _, c := range []struct {
		name     string
		st       swarm.Status
		degraded bool
		check    string // a substring of the check
	}{
		{"quiet", swarm.Status{Bootstrap: 1}, false, "ok"},
		{"bootstrap down: no report", swarm.Status{Bootstrap: 2}, false, "ok"},
		{"lone home with a problem", swarm.Status{Errors: mismatch}, false, "swarm key mismatch"},
		{"connected despite a problem", swarm.Status{Peers: 1, Bootstrap: 1, Errors: mismatch}, false, "swarm key mismatch"},
		{"cannot share", swarm.Status{Bootstrap: 1, Errors: append([]string{"older"}, mismatch...)}, true, "(1 bootstrap peers configured)"},
	} {
		check, degraded := swarmCheck(c.st)
		if degraded != c.degraded || !strings.Contains(check, c.check) {
			t.Errorf("%s: %q, degraded %v; want %q in it, degraded %v", c.name, check, degraded, c.check, c.degraded)
		}
		if c.degraded && !strings.Contains(check, mismatch[0]) {
			t.Errorf("%s: %q does not name the latest problem", c.name, check)
		}
	}
}
