package swarm

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// stallingPeers connects k peers to v that accept sync streams, read
// them and never answer. It returns how many such streams are open.
func stallingPeers(t *testing.T, mn mocknet.Mocknet, v *Swarm, k int) *atomic.Int32 {
	t.Helper()
	var open atomic.Int32
	for range k {
		sy, err := mn.GenPeer()
		if err != nil {
			t.Fatal(err)
		}
		sy.SetStreamHandler(ProtocolSync, func(st network.Stream) {
			open.Add(1)
			defer open.Add(-1)
			_, _ = io.Copy(io.Discard, st)
		})
		if _, err := mn.LinkPeers(sy.ID(), v.host.ID()); err != nil {
			t.Fatal(err)
		}
		if _, err := mn.ConnectPeers(sy.ID(), v.host.ID()); err != nil {
			t.Fatal(err)
		}
	}
	return &open
}

// TestSchedule_StallingPeersLeaveASlotForProvenPeers: "trusting a signer
// later brings its earlier claims" runs through the node's own outbound
// sessions (Resync: every connected peer, a few at a time). Peer ids that
// accept a session and never answer would each hold a slot for the idle
// limit, and the honest peer's session would wait behind them. A slot is
// kept for peers whose last session succeeded. The stalling peers here
// hold their slots for ten minutes (no first-answer limit), far past the
// test's wait, so the honest session can only have run in the reserved
// slot.
func TestSchedule_StallingPeersLeaveASlotForProvenPeers(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	lim := defaultSessionLimits
	lim.idle, lim.first = 10*time.Minute, 0
	// No session starts but those the test asks for (Resync runs all the
	// same): only v's own sessions can bring h's claims.
	noAuto := func(c *Config) { c.NoAutoSync = true }
	v := trustSwarm(t, mn, 20, store.TrustList, &lim, noAuto)
	h := trustSwarm(t, mn, 21, store.TrustOpen, nil, noAuto)
	w := storetest.Signer(795)
	ts := uint64(time.Now().UnixMilli()) - 10_000
	var cs []store.Claim
	for i := range 10 {
		cs = append(cs, w.Text(storetest.CID(7000+i), "title", "x", ts+uint64(i)))
	}
	if _, err := h.cfg.Store.Submit(t.Context(), cs, store.SubmitOptions{Origin: store.OriginLocal}); err != nil {
		t.Fatal(err)
	}
	stalled := stallingPeers(t, mn, v, 4*maxOutboundSyncs)
	if _, err := mn.LinkPeers(v.host.ID(), h.host.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := mn.ConnectPeers(v.host.ID(), h.host.ID()); err != nil {
		t.Fatal(err)
	}
	// A session with h that succeeds (w is not trusted yet: nothing moves).
	if _, err := v.SyncWith(t.Context(), h.host.ID()); err != nil {
		t.Fatal(err)
	}
	// A round with every peer: the stalling peers take every slot open to
	// any peer, and keep them; the session with h ends.
	round := time.Now()
	v.Resync()
	deadline := time.Now().Add(30 * time.Second)
	for stalled.Load() < maxOutboundSyncs || !v.peerStats.lastTry(h.host.ID()).After(round) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d sessions with stalling peers started", stalled.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	vs := v.cfg.Store.(*store.Store)
	if err := vs.Trust(t.Context(), w.UID(), "owner"); err != nil {
		t.Fatal(err)
	}
	v.Resync()
	deadline = time.Now().Add(30 * time.Second)
	for vs.SyncSet().Len() < len(cs) {
		if time.Now().After(deadline) {
			t.Fatalf("no catch-up from the honest peer in 30 s: %d stalling peers hold every outbound slot (%d of %d claims)",
				stalled.Load(), vs.SyncSet().Len(), len(cs))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSync_PeerMustAnswerFirstTurnSoon: an outbound session with a peer
// that accepts the stream and never answers ends after the first-answer
// limit, not the idle limit (ten minutes here).
func TestSync_PeerMustAnswerFirstTurnSoon(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	lim := defaultSessionLimits
	lim.idle, lim.first = 10*time.Minute, 500*time.Millisecond
	v := trustSwarm(t, mn, 22, store.TrustList, &lim)
	stallingPeers(t, mn, v, 1)
	p := v.host.Network().Peers()[0]
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := v.SyncWith(ctx, p)
	if !errors.Is(err, errSessionExpired) {
		t.Fatalf("session with a peer that never answers: %v, want it cut by the first-answer limit", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the session ran until the test's own deadline")
	}
}
