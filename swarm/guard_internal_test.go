package swarm

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
)

// A session's allowance: base, plus a second per minRate bytes moved, at
// most max; never more than idle from the last frame.
func TestSessionGuard_Allowance(t *testing.T) {
	t0 := time.Unix(1000, 0)
	g := &sessionGuard{lim: sessionLimits{idle: 30 * time.Second, base: 2 * time.Minute, minRate: 1000, max: 30 * time.Minute}, started: t0}
	for _, c := range []struct {
		moved int64
		at    time.Duration // since start
		want  time.Duration
	}{
		{0, 0, 30 * time.Second},                                     // idle bound
		{0, 110 * time.Second, 10 * time.Second},                     // base nearly spent
		{0, 3 * time.Minute, 0},                                      // base spent, nothing moved: cut
		{60_000, 3 * time.Minute, 0},                                 // 60 s bought: exactly spent
		{90_000, 3 * time.Minute, 30 * time.Second},                  // 90 s bought
		{1 << 40, 29*time.Minute + 50*time.Second, 10 * time.Second}, // at most max
		{1 << 40, 31 * time.Minute, 0},
	} {
		if got := g.next(c.moved, t0.Add(c.at)); got != c.want {
			t.Errorf("moved %d at %v: %v left, want %v", c.moved, c.at, got, c.want)
		}
	}
}

// A wait on the node's own store is credited: it spends neither the idle
// limit nor the session's lifetime, so a session is not cut the moment a
// slow commit lets it go on.
func TestSessionGuard_HoldIsCredited(t *testing.T) {
	lim := sessionLimits{idle: 30 * time.Second, base: 2 * time.Minute, minRate: 1 << 40, max: 30 * time.Minute}
	start := time.Now().Add(-3 * time.Minute) // base spent
	g := newSessionGuard(resetOnly{}, lim, start)
	defer g.stop()
	g.hold()
	g.mu.Lock()
	g.held = g.held.Add(-2 * time.Minute) // the store took two minutes
	g.mu.Unlock()
	g.progress(0)
	g.mu.Lock()
	credit, left := g.credit, g.next(0, time.Now())
	g.mu.Unlock()
	if credit < 2*time.Minute || left <= 0 || g.expired() {
		t.Fatalf("after a 2-minute wait on the store: credit %v, %v left, expired %v", credit, left, g.expired())
	}
}

// resetOnly is a stream the guard can reset and nothing else.
type resetOnly struct{ network.Stream }

func (resetOnly) Reset() error { return nil }
