package swarm_test

import (
	"context"
	"sync"
	"testing"
	"time"

	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

// dedupeClaims is the set the full peers of the tests below hold: a few
// thousand, signed once for both tests (a few hundred under the race
// detector, whose SQLite stores each take about 2 ms a claim).
var dedupeClaims = sync.OnceValue(func() []store.Claim {
	n := 3000
	if swarm.RaceEnabled {
		n = 400
	}
	w, _ := store.GenerateSigner()
	return signMany(w, 0, n, uint64(time.Now().UnixMilli())-uint64(n)-1000)
})

// fullPeer is a node holding claims (stored pre-verified: only the
// catching-up node's verification is part of the test).
func fullPeer(t *testing.T, mn mocknet.Mocknet, claims []store.Claim, o nodeOpt) *node {
	t.Helper()
	o.mn = mn
	n := newNode(t, o)
	for chunk := range chunks(claims, 4096) {
		if _, err := n.st.Submit(context.Background(), chunk, store.SubmitOptions{Origin: store.OriginLocal, Verified: true}); err != nil {
			t.Fatal(err)
		}
	}
	if k, _ := n.setOf(); k != len(claims) {
		t.Fatalf("full peer holds %d of %d claims", k, len(claims))
	}
	return n
}

// claimsSent is what the peers sent by sync, all of it to the one node
// they are connected to. Closing first makes every session's figures final
// (a session records them when it ends).
func claimsSent(peers ...*node) int64 {
	var sum int64
	for _, p := range peers {
		_ = p.sw.Close()
		sum += p.sw.Counters().ClaimsSent
	}
	return sum
}

// An empty node connecting to three full peers at once receives each
// claim about once, not once per peer: its sessions do not ask two peers
// for the same claims at the same time (inflight.go). Before, each
// session streamed the whole set: about 3 N.
func TestSync_CatchUpFromSeveralPeersOnce(t *testing.T) {
	claims := dedupeClaims()
	n := len(claims)
	mn := newMocknet(t)
	peers := []*node{fullPeer(t, mn, claims, nodeOpt{}), fullPeer(t, mn, claims, nodeOpt{}), fullPeer(t, mn, claims, nodeOpt{})}
	reg := prometheus.NewRegistry()
	e := newNode(t, nodeOpt{mn: mn, swarm: func(c *swarm.Config) { c.Registerer = reg }})
	for _, p := range peers {
		if _, err := mn.LinkPeers(e.id, p.id); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup // all at once, as a node back online meets its peers
	for _, p := range peers {
		wg.Go(func() { _, _ = mn.ConnectPeers(e.id, p.id) })
	}
	wg.Wait()
	waitSame(t, 60*time.Second, n, append([]*node{e}, peers...)...)
	sent := claimsSent(peers...)
	t.Logf("%d claims caught up from 3 peers: %d sent (%.2f N)", n, sent, float64(sent)/float64(n))
	if sent > int64(n)*13/10 {
		t.Fatalf("the peers sent %d claims for %d missing (%.2f N): sessions asked for the same claims at once",
			sent, n, float64(sent)/float64(n))
	}
	// /metrics shows the copies: received_all counts every claim the
	// node's sessions took in, received only those new to it.
	syncClaims := func(dir string) float64 {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() != "metanode_swarm_sync_claims_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "dir" && l.GetValue() == dir {
						return m.GetCounter().GetValue()
					}
				}
			}
		}
		return 0
	}
	waitFor(t, 30*time.Second, "the node's sessions to end and count what they received", func() bool {
		return syncClaims("received") == float64(n) && syncClaims("received_all") >= float64(n)
	})
	if all := syncClaims("received_all"); all > float64(sent) {
		t.Fatalf("received_all %v, more than the %d claims the peers sent", all, sent)
	}
}

// A node that lacks every third claim (scattered over its whole history,
// so they come by id lists, sketches and WANTs, not by streamed ranges)
// meets three full peers at once and receives each missing claim once.
// Skipped under the race detector for time (the cold case above covers the
// registry there): four stores of a few thousand claims.
func TestSync_CatchUpScatteredFromSeveralPeersOnce(t *testing.T) {
	if swarm.RaceEnabled {
		t.Skip("four stores of 3,000 claims take a minute under the race detector")
	}
	claims := dedupeClaims()
	mn := newMocknet(t)
	peers := []*node{fullPeer(t, mn, claims, nodeOpt{}), fullPeer(t, mn, claims, nodeOpt{}), fullPeer(t, mn, claims, nodeOpt{})}
	var have []store.Claim
	for i, c := range claims {
		if i%3 != 0 {
			have = append(have, c)
		}
	}
	missing := len(claims) - len(have)
	e := fullPeer(t, mn, have, nodeOpt{})
	for _, p := range peers {
		if _, err := mn.LinkPeers(e.id, p.id); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Go(func() { _, _ = mn.ConnectPeers(e.id, p.id) })
	}
	wg.Wait()
	waitSame(t, 60*time.Second, len(claims), append([]*node{e}, peers...)...)
	sent := claimsSent(peers...)
	t.Logf("%d scattered claims missing, %d sent by 3 peers", missing, sent)
	if sent > int64(missing)*13/10 {
		t.Fatalf("the peers sent %d claims for %d missing: sessions asked for the same claims at once", sent, missing)
	}
}

// stallStore is a full peer's store whose range reads (what a peer
// streams to an empty node) wait until the swarm closes.
type stallStore struct {
	*store.Store
	stalled chan struct{} // closed at the first stalled read
	once    sync.Once
}

func (s *stallStore) ClaimsInRange(ctx context.Context, lo, hi store.SyncItem, limit int) ([]store.Claim, error) {
	s.once.Do(func() { close(s.stalled) })
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

// The session the others left the claims to dies before it delivers any
// (its peer stalls, then closes): the node still ends with every claim,
// because the sessions that deferred to it run again once it has ended.
// Nothing else would start them: the dead session brought nothing in (no
// cascade), the sessions on topic joins have run, the periodic round is an
// hour away.
func TestSync_CatchUpWhenTheStreamingPeerDies(t *testing.T) {
	claims := dedupeClaims()
	n := len(claims)
	mn := newMocknet(t)
	stall := &stallStore{stalled: make(chan struct{})}
	slow := fullPeer(t, mn, claims, nodeOpt{noOpen: true, swarm: func(c *swarm.Config) {
		st, ok := c.Store.(*store.Store)
		if !ok {
			t.Fatalf("store is a %T", c.Store)
		}
		stall.Store = st
		c.Store = stall
	}})
	slow.open(t)
	peers := []*node{fullPeer(t, mn, claims, nodeOpt{}), fullPeer(t, mn, claims, nodeOpt{})}
	e := newNode(t, nodeOpt{mn: mn})
	linkConnect(t, mn, e, slow)
	select {
	case <-stall.stalled: // e's session with slow holds the whole set in flight
	case <-time.After(20 * time.Second):
		t.Fatal("the slow peer was never asked to stream")
	}
	for _, p := range peers {
		linkConnect(t, mn, e, p)
	}
	// The sessions with the other peers, on connection and 2 s later on
	// their topic join, end having left everything to the stalled one;
	// nothing else would start another before an hour.
	waitFor(t, 20*time.Second, "the other sessions to end", func() bool {
		return peers[0].sw.Counters().Sessions >= 2 && peers[1].sw.Counters().Sessions >= 2
	})
	if k, _ := e.setOf(); k != 0 {
		t.Fatalf("the node took %d claims from the other peers while one streamed to it", k)
	}
	_ = slow.sw.Close()
	waitSame(t, 60*time.Second, n, append([]*node{e}, peers...)...)
	sent := claimsSent(peers...)
	t.Logf("%d claims after the streaming peer died: %d sent by the other two", n, sent)
	if sent > int64(n)*13/10 {
		t.Fatalf("the other peers sent %d claims for %d missing", sent, n)
	}
}
