package swarm

import (
	"context"
	"maps"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// "Catch-up starts within a second of a connection" (spec/swarm.md
// promise 2), in virtual time: in a synctest bubble the scheduler is told
// of a new connection, one virtual second passes, and the session with
// that peer must have started by then, with its interest fetch. Periodic
// rounds are an hour apart and the peer joins no topic, so only the
// connection trigger can start it. The peer with the lower id starts the
// session: the other side starts none.
func TestSchedule_CatchUpWithinASecondOfConnection(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	h, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	const promise = time.Second
	above, below := peer.ID("\xff"), peer.ID("\x00") // peer ids above and below the host's
	synctest.Test(t, func(t *testing.T) {
		type session struct {
			p        peer.ID
			interest bool
		}
		sessions := make(chan session, 8)
		s := schedulerOnly(t, h)
		s.sessionRun = func(_ context.Context, _ slots, p peer.ID, interest bool) sessionEnd {
			sessions <- session{p: p, interest: interest}
			return sessionDone
		}
		stop := startScheduler(t, s)

		s.connCh <- below
		s.connCh <- above
		time.Sleep(promise)
		synctest.Wait()
		stop()
		close(sessions)
		var got []session
		var with []string
		for se := range sessions {
			got = append(got, se)
			with = append(with, se.p.String())
		}
		if len(got) != 1 || got[0].p != above {
			t.Fatalf("sessions within %v of the connections: with %q; want one, with %s (the peer above this node's id)", promise, with, above)
		}
		if !got[0].interest {
			t.Error("the connection's session has no interest fetch")
		}
	})
}

// A re-run (inflight.go: a session that left claims to others, run again
// once they ended) that fails is tried again, a bounded number of times;
// one that succeeds is not repeated, and an ordinary session that fails
// waits for the periodic round as before. In virtual time.
func TestSchedule_FailedRerunIsRetried(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	h, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	failing, once, plain := peer.ID("\xfa"), peer.ID("\xfb"), peer.ID("\xfc")
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		sessions := map[peer.ID]int{}
		s := schedulerOnly(t, h)
		s.sessionRun = func(_ context.Context, _ slots, p peer.ID, _ bool) sessionEnd {
			mu.Lock()
			defer mu.Unlock()
			sessions[p]++
			if p == failing || p == plain || (p == once && sessions[p] == 1) {
				return sessionFailed
			}
			return sessionDone
		}
		stop := startScheduler(t, s)
		synctest.Wait()
		reg := s.flights()
		reg.mu.Lock()
		reg.makeReady(failing)
		reg.makeReady(once)
		reg.mu.Unlock()
		s.connCh <- plain
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		stop()
		want := map[peer.ID]int{failing: 1 + rerunRetries, once: 2, plain: 1}
		if !maps.Equal(sessions, want) {
			t.Fatalf("sessions per peer: %v; want %v (a failed re-run tried again %d times, no more)", sessions, want, rerunRetries)
		}
	})
}

// The scheduler runs again, on its tick, a peer whose session left claims
// to a session held open past maxDeferAge (inflight.expire): without the
// tick's call the peer would wait for that session's end, up to
// sessionTimeout. In virtual time.
func TestSchedule_RerunsPeerWaitingForAHeldSession(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	h, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	honest := peer.ID("\xfd")
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var ran []peer.ID
		s := schedulerOnly(t, h)
		s.sessionRun = func(_ context.Context, _ slots, p peer.ID, _ bool) sessionEnd {
			mu.Lock()
			defer mu.Unlock()
			ran = append(ran, p)
			return sessionDone
		}
		stop := startScheduler(t, s)
		synctest.Wait()
		reg := s.flights()
		cold := func() turnPlan { return turnPlan{ranges: []rangeEntry{emptyFP(store.MaxSyncItem)}} }
		held := reg.begin("held", true)
		ph := cold()
		reg.claim(held, &ph)
		w := reg.begin(honest, true)
		pw := cold()
		reg.claim(w, &pw)
		reg.end(w) // honest now waits for held, which never ends
		time.Sleep(maxDeferAge + 2*time.Second)
		synctest.Wait()
		stop()
		if len(ran) != 1 || ran[0] != honest {
			t.Fatalf("sessions run: %q; want one with the peer that waited for the held session", ran)
		}
		reg.end(held)
	})
}

// schedulerOnly is a swarm with just what its sync scheduler reads: its
// host, a log, its channels; periodic rounds an hour apart. Tests set
// sessionRun.
func schedulerOnly(t *testing.T, h host.Host) *Swarm {
	return &Swarm{host: h, log: storetest.Logger(t, 8), cfg: Config{SyncInterval: time.Hour},
		connCh: make(chan peer.ID, 2), joinCh: make(chan peer.ID, 1),
		cascadeCh: make(chan peer.ID, 1), resyncCh: make(chan struct{}, 1)}
}

// startScheduler runs s's sync scheduler; stop ends it and waits for it
// and its sessions.
func startScheduler(t *testing.T, s *Swarm) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() { defer close(stopped); s.runSyncScheduler(ctx) }()
	return func() { cancel(); <-stopped }
}
