package swarm

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

const (
	maxOutboundSyncs = 4 // sessions this node starts at once
	// reservedSyncs more are kept for peers whose last session with this
	// node succeeded: peer ids cost nothing, and ones that accept a session
	// and never answer would otherwise hold every slot, so that the
	// catch-up after a trust change (Resync: every peer) waited minutes
	// behind them (trust review R7-T6).
	reservedSyncs   = 1
	maxInboundSyncs = 8  // sessions peers may run against this node at once
	periodicPeers   = 3  // peers reconciled with per period
	interestEvery   = 10 // periods between interest fetches from one peer
	sessionTimeout  = 30 * time.Minute
	// cascadeDelay: after a session brought in claims, the other peers are
	// reconciled with this soon after, so claims recovered by sync (a
	// healed partition, a node back online) spread past the two nodes of
	// the new connection without waiting for the periodic sync. Sessions
	// between nodes that agree cost one round trip.
	cascadeDelay = 500 * time.Millisecond
	// joinSyncDelay: a peer's topic subscription arrives after the
	// connection, and gossipsub grafts it into the mesh at a heartbeat (1 s):
	// a claim forwarded in between never reaches it (GRAFT does not replay).
	// One more session once the mesh holds the peer closes that gap.
	joinSyncDelay = 2 * time.Second
	// A re-run (a session that left claims to others, run again once those
	// ended) that fails (the peer busy or not ready, the stream refused) is
	// tried again rerunRetryDelay × attempt later, up to rerunRetries times:
	// what it was for would otherwise wait for the periodic round, where
	// that peer comes last (it was just tried): with many peers, minutes.
	rerunRetries    = 3
	rerunRetryDelay = 2 * time.Second
)

// runSyncScheduler starts sync sessions: with a peer right after it
// connects (one side only, the one with the lower peer id, so a connection
// costs one session), every SyncInterval with the few peers synced least
// recently, with every other peer shortly after a session brought claims
// in, and with every peer on Resync (in interest mode with an interest
// fetch first), and again with a peer whose session left claims to other
// sessions once those have ended (inflight.go; a failed re-run is tried
// again up to rerunRetries times). It owns the session
// goroutines and waits for them before returning.
func (s *Swarm) runSyncScheduler(ctx context.Context) {
	reg := newInflight()
	s.inflight.Store(reg)
	defer s.inflight.Store(nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := slots{any: make(chan struct{}, maxOutboundSyncs), proven: make(chan struct{}, reservedSyncs)}
	var mu sync.Mutex
	// running: a session with the peer is under way; again: another was
	// asked for meanwhile (a trust change must not be lost to a session
	// that started before it); rerun: one of them is a re-run (0: none,
	// else its attempt).
	type state struct {
		again, interest bool
		rerun           int
	}
	running := map[peer.ID]*state{}
	type retry struct {
		due     time.Time
		attempt int
	}
	retries := map[peer.ID]retry{} // failed re-runs to try again
	run := s.runSession
	if s.sessionRun != nil {
		run = s.sessionRun
	}
	// ended notes how a session with p went; a failed re-run is tried
	// again later. Called with mu held.
	ended := func(p peer.ID, rerun int, how sessionEnd) {
		if rerun == 0 || rerun > rerunRetries || how != sessionFailed {
			return
		}
		retries[p] = retry{due: time.Now().Add(rerunRetryDelay * time.Duration(rerun)), attempt: rerun + 1}
	}
	start := func(p peer.ID, interest bool, rerun int) {
		mu.Lock()
		if st, ok := running[p]; ok {
			st.again = true
			st.interest = st.interest || interest
			st.rerun = max(st.rerun, rerun)
			mu.Unlock()
			return
		}
		running[p] = &state{}
		mu.Unlock()
		wg.Go(func() {
			for {
				how := run(ctx, sem, p, interest)
				if how == sessionClosing {
					break
				}
				mu.Lock()
				ended(p, rerun, how)
				st := running[p]
				if !st.again {
					delete(running, p)
					mu.Unlock()
					return
				}
				interest, rerun = st.interest, st.rerun
				*st = state{}
				mu.Unlock()
			}
			mu.Lock()
			delete(running, p)
			mu.Unlock()
		})
	}
	period := func() time.Duration { // jittered ±20%
		d := s.cfg.SyncInterval
		return d*4/5 + time.Duration(rand.Int64N(int64(d)*2/5+1))
	}
	timer := time.NewTimer(period())
	defer timer.Stop()
	cascade := time.NewTimer(time.Hour)
	cascade.Stop()
	defer cascade.Stop()
	sources := map[peer.ID]bool{}
	joined := map[peer.ID]time.Time{} // topic joins waiting for their sync
	joinTick := time.NewTicker(joinSyncDelay / 4)
	defer joinTick.Stop()
	ticks := 0
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-s.joinCh:
			if s.cfg.NoAutoSync {
				continue
			}
			if s.host.ID() < p || s.cfg.Interest != nil {
				joined[p] = time.Now().Add(joinSyncDelay)
			}
		case now := <-joinTick.C:
			reg.expire(now) // peers waiting for sessions held open too long
			for p, due := range joined {
				if now.After(due) {
					delete(joined, p)
					start(p, false, 0)
				}
			}
			again := map[peer.ID]int{}
			mu.Lock()
			for p, r := range retries {
				if now.After(r.due) {
					delete(retries, p)
					again[p] = r.attempt
				}
			}
			mu.Unlock()
			for p, attempt := range again {
				start(p, false, attempt)
			}
		case p := <-s.cascadeCh:
			if s.cfg.NoAutoSync {
				continue
			}
			if len(sources) == 0 {
				cascade.Reset(cascadeDelay)
			}
			sources[p] = true
		case <-cascade.C:
			// Every peer, the sources too: a node between two others learns
			// from each what the other lacks. A session that moves nothing
			// costs one round trip and cascades no further.
			for _, p := range s.peerStats.byPromise(s.host.Network().Peers()) {
				start(p, false, 0)
			}
			clear(sources)
		case <-reg.wake:
			// Sessions that left claims to others whose sessions have
			// ended now: whatever those did not bring is asked for again.
			for _, p := range reg.takeReady() {
				start(p, false, 1)
			}
		case p := <-s.connCh:
			if s.cfg.NoAutoSync {
				continue
			}
			if s.host.ID() < p || s.cfg.Interest != nil {
				start(p, true, 0)
			}
		case <-s.resyncCh:
			// A trust change: in interest mode the interest fetch is how
			// the newly trusted signers' vouches (their peer-id cids) and
			// their claims about known cids come (sync brings none), so it
			// runs with every peer now, as at connection, not at the next
			// periodic turn (interestEvery periods away). Peers that answered
			// last time first.
			for _, p := range s.peerStats.byPromise(s.host.Network().Peers()) {
				start(p, true, 0)
			}
		case <-timer.C:
			if s.cfg.NoAutoSync {
				timer.Reset(period())
				continue
			}
			ticks++
			for i, p := range s.leastRecentlySynced(periodicPeers) {
				start(p, i == 0 && ticks%interestEvery == 0, 0)
			}
			timer.Reset(period())
		}
	}
}

// leastRecentlySynced returns up to n connected peers that speak the sync
// protocol, those whose last session (failed or not) ended longest ago
// first.
func (s *Swarm) leastRecentlySynced(n int) []peer.ID {
	var ps []peer.ID
	for _, p := range s.host.Network().Peers() {
		if ok, _ := s.host.Peerstore().SupportsProtocols(p, ProtocolSync); len(ok) > 0 {
			ps = append(ps, p)
		}
	}
	rand.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
	slices.SortStableFunc(ps, func(a, b peer.ID) int {
		return s.peerStats.lastTry(a).Compare(s.peerStats.lastTry(b))
	})
	return ps[:min(n, len(ps))]
}

// slots are the outbound session slots: any peer's, and those only a peer
// whose last session succeeded may take.
type slots struct{ any, proven chan struct{} }

// take waits for a slot and returns it (nil when ctx ends). proven says
// whether the peer may take a reserved one; it is asked again every
// second, since a session with the peer may succeed meanwhile (e.g. one the
// owner started).
func (sl slots) take(ctx context.Context, proven func() bool) chan struct{} {
	recheck := time.NewTimer(time.Second)
	defer recheck.Stop()
	for {
		var more chan struct{} // nil: never ready
		if proven() {
			more = sl.proven
		}
		select {
		case sl.any <- struct{}{}:
			return sl.any
		case more <- struct{}{}:
			return more
		case <-ctx.Done():
			return nil
		case <-recheck.C:
			recheck.Reset(time.Second)
		}
	}
}

// sessionEnd is how a scheduled session ended.
type sessionEnd int

const (
	sessionDone    sessionEnd = iota // ran, or the peer is gone
	sessionFailed                    // the session failed (refused, busy, broken)
	sessionClosing                   // the swarm is closing
)

// runSession runs one scheduled session with p once a slot is free.
func (s *Swarm) runSession(ctx context.Context, sem slots, p peer.ID, interest bool) sessionEnd {
	slot := sem.take(ctx, func() bool { return s.peerStats.answered(p) })
	if slot == nil {
		return sessionClosing
	}
	defer func() { <-slot }()
	sctx, cancel := context.WithTimeout(ctx, sessionTimeout)
	defer cancel()
	if s.host.Network().Connectedness(p) != network.Connected {
		return sessionDone
	}
	if interest && s.cfg.Interest != nil {
		s.fetchInterest(sctx, p)
	}
	_, err := s.syncWith(sctx, p, true)
	switch {
	case ctx.Err() != nil:
		return sessionClosing
	case err != nil:
		return sessionFailed
	}
	return sessionDone
}
