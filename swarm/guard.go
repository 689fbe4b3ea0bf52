package swarm

import (
	"errors"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
)

// How long a sync session may take. A hostile peer that trickles small
// frames must not hold one of a node's few session slots for long, while
// an honest catch-up of a big store (1M claims stream for about three
// minutes here) must not be cut. So a session's allowance grows with the
// work it does: sessionBase, plus one second per sessionMinRate bytes of
// work (session.work: not claims refused or already held, which cost the
// peer nothing), never past sessionTimeout. Whatever a session was cut
// short of is stored as it arrived, and the next session carries on.
// Between two frames (either way) at most frameTimeout may pass; before
// the peer's HELLO, at most firstAnswer (a peer id that accepts a session
// and never answers must not hold one of the few outbound slots for the
// whole idle limit: trust review R7-T6).
type sessionLimits struct {
	idle    time.Duration // between two frames, either way
	first   time.Duration // until the peer's HELLO (0: idle)
	base    time.Duration // lifetime before counting bytes
	minRate int64         // bytes per second that extend the lifetime
	max     time.Duration // lifetime, however much moves
}

const (
	// firstAnswer bounds the wait for the peer's HELLO. A responder sends
	// it (flushed on its own) as soon as it has read the asker's first
	// turn; one whose sync set is still loading answers ERROR 2 (not
	// ready) within readyTimeout, below this.
	firstAnswer    = 5 * time.Second
	sessionBase    = 2 * time.Minute
	sessionMinRate = 64 << 10 // bytes/s: a home uplink moves far more
)

var defaultSessionLimits = sessionLimits{
	idle: frameTimeout, first: firstAnswer, base: sessionBase, minRate: sessionMinRate, max: sessionTimeout,
}

// errSessionExpired: a session went idle past its limit or outlived its
// allowance; its stream was reset.
var errSessionExpired = errors.New("sync session idle or too long")

// sessionGuard resets a session's stream when the session goes idle or
// outlives its allowance. It works on every transport (per-frame stream
// deadlines are kept too, but mocknet and some transports ignore them).
type sessionGuard struct {
	lim     sessionLimits
	started time.Time
	mu      sync.Mutex
	timer   *time.Timer
	fired   bool
	stopped bool
	heard   bool          // the peer's HELLO came
	held    time.Time     // when the current wait on the store began (zero: none)
	credit  time.Duration // time spent waiting on the store: not the session's to spend
}

func newSessionGuard(st network.Stream, lim sessionLimits, started time.Time) *sessionGuard {
	g := &sessionGuard{lim: lim, started: started}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.timer = time.AfterFunc(g.next(0, started), func() {
		g.mu.Lock()
		stop := g.stopped
		g.fired = !stop
		g.mu.Unlock()
		if !stop {
			_ = st.Reset()
		}
	})
	return g
}

// next is how long from now the session may go on, having moved bytes.
func (g *sessionGuard) next(moved int64, now time.Time) time.Duration {
	life := g.lim.base
	if g.lim.minRate > 0 {
		life += time.Duration(moved / g.lim.minRate * int64(time.Second))
	}
	life = min(life+g.credit, g.lim.max)
	return max(0, min(g.idle(), g.started.Add(life).Sub(now)))
}

// idle is the limit between two frames now: the first-answer limit until
// the peer's HELLO came. Called with mu held or by the session's goroutine.
func (g *sessionGuard) idle() time.Duration {
	if !g.heard && g.lim.first > 0 {
		return min(g.lim.idle, g.lim.first)
	}
	return g.lim.idle
}

// heardPeer records the peer's HELLO: the idle limit applies from now on.
func (g *sessionGuard) heardPeer() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.heard = true
}

// readLimit is the read deadline's length for the next frame.
func (g *sessionGuard) readLimit() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.idle()
}

// progress rearms the guard at a frame boundary; moved is the session's
// bytes of work so far.
func (g *sessionGuard) progress(moved int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped || g.fired {
		return
	}
	now := time.Now()
	if !g.held.IsZero() {
		g.credit += now.Sub(g.held)
		g.held = time.Time{}
	}
	g.timer.Reset(g.next(moved, now))
}

// hold disarms the guard while the session waits on this node's own store
// (not the peer's doing); the next progress rearms it, and the wait counts
// against neither the idle limit nor the session's lifetime here. The
// peer's guard cannot tell a stall from a slow reader, so a stall longer
// than its limits (30 s idle) still gets the session cut there; what the
// session carried is stored and the next one moves the rest.
func (g *sessionGuard) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.timer.Stop()
	if g.held.IsZero() {
		g.held = time.Now()
	}
}

// stop disarms the guard once the exchange is over.
func (g *sessionGuard) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	g.timer.Stop()
}

// expired reports whether the guard reset the stream.
func (g *sessionGuard) expired() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fired
}
