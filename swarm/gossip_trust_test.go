package swarm_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

// waitMeshed waits until each pair of nodes is in the other's gossip mesh.
func waitMeshed(t *testing.T, pairs ...[2]*node) {
	t.Helper()
	waitFor(t, 20*time.Second, "gossip meshes", func() bool {
		for _, p := range pairs {
			if !slices.Contains(p[0].sw.MeshPeers(), p[1].id) || !slices.Contains(p[1].sw.MeshPeers(), p[0].id) {
				return false
			}
		}
		return true
	})
}

// versions signs n superseded versions of one field, oldest first, from ts.
func versions(w *store.Signer, cid string, n int, ts uint64) []store.Claim {
	out := make([]store.Claim, n)
	for i := range out {
		out[i] = w.Text(cid, "title", fmt.Sprintf("version %d", i), ts+uint64(i))
	}
	return out
}

// replayEvery publishes one message per claim, one every 25 ms, on topic
// until the claims run out or the test stops it (the returned func).
// Every 25 ms: a token refilled at 1/s is taken by the replay, not by the
// one honest claim, unless the replay is not charged.
func replayEvery(t *testing.T, topic *pubsub.Topic, claims []store.Claim) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for i := range claims {
			if err := topic.Publish(ctx, swarm.EncodeGossip(claims[i:i+1])); err != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	stop = func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return stop
}

// TestGossip_FrontRunClaimStillRelayedLive: a stranger X (no key anyone
// trusts, never penalised) sends relay H a copy of a trusted signer's new
// claim bundled with a claim of its own. H ignores that message but stores
// the trusted claim; when the genuine message reaches H every claim in it
// is known, so H ignores it too. H must still relay the claim live: it
// publishes what it stored from the ignored message as its own batch, and
// D, which hears the swarm only through H, gets it live (no node here
// syncs on its own).
func TestGossip_FrontRunClaimStillRelayedLive(t *testing.T) {
	ctx := context.Background()
	mn := newMocknet(t)
	writer, stranger := mustSigner(t), mustSigner(t)
	p := newNode(t, nodeOpt{mn: mn, swarm: noAutoSync}) // the origin (open)
	h := newNode(t, nodeOpt{mn: mn, trust: store.TrustList, swarm: noAutoSync})
	d := newNode(t, nodeOpt{mn: mn, trust: store.TrustList, swarm: noAutoSync})
	for _, n := range []*node{h, d} {
		if err := n.st.Trust(ctx, writer.UID(), "test"); err != nil {
			t.Fatal(err)
		}
	}
	linkConnect(t, mn, p, h)
	linkConnect(t, mn, h, d)
	bad, topic := swarm.NewGossipAttacker(t, mn, h.id, h.sw.Topic())
	ts := uint64(time.Now().UnixMilli()) - 1000
	cs := signMany(writer, 0, 3, ts)

	// Control: a claim published by P reaches D live through H.
	waitMeshed(t, [2]*node{p, h}, [2]*node{h, d})
	p.submit(t, cs[:1])
	waitFor(t, 10*time.Second, "the control claim to reach D through H", func() bool { return d.holds(cs[0]) })

	junk := stranger.Text(testCID(900), "title", "junk", ts)
	if err := topic.Publish(ctx, swarm.EncodeGossip([]store.Claim{cs[1], junk})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "H to store the front-run claim", func() bool { return h.holds(cs[1]) })
	p.submit(t, cs[1:2]) // the genuine message: all known at H
	waitFor(t, 10*time.Second, "D to get the front-run claim live through H (no sync runs)", func() bool { return d.holds(cs[1]) })
	if d.holds(junk) {
		t.Error("D stored the stranger's claim")
	}
	if h.sw.Struck(bad.ID()) {
		t.Error("H struck the stranger for an untrusted claim (ignored without penalty by design)")
	}
}

// TestGossip_StaleReplaySpendsNoSignerBudget: any peer can replay a trusted
// signer's superseded claims (genuine: they verify; not in the sync set,
// which holds only current rows). They change nothing in the store, so
// they must not spend the signer's gossip budget: the signer's new claim,
// relayed by an honest peer while the replay goes on, is stored. Signer
// rate scaled to 1/s (burst 5) so that the replay, one stale claim every
// 25 ms, would keep the bucket empty if it were charged. No sync runs.
func TestGossip_StaleReplaySpendsNoSignerBudget(t *testing.T) {
	ctx := context.Background()
	mn := newMocknet(t)
	writer := mustSigner(t)
	p := newNode(t, nodeOpt{mn: mn, swarm: noAutoSync}) // honest origin
	v := newNode(t, nodeOpt{mn: mn, trust: store.TrustList, swarm: func(c *swarm.Config) { c.SignerRate, c.NoAutoSync = 1, true }})
	if err := v.st.Trust(ctx, writer.UID(), "test"); err != nil {
		t.Fatal(err)
	}
	linkConnect(t, mn, p, v)
	bad, topic := swarm.NewGossipAttacker(t, mn, v.id, v.sw.Topic())
	ts := uint64(time.Now().UnixMilli()) - 60_000
	old := versions(writer, testCID(1), 120, ts)
	current := writer.Text(testCID(1), "title", "current", ts+200)
	v.submit(t, []store.Claim{current})
	waitMeshed(t, [2]*node{p, v})
	control := writer.Text(testCID(2), "title", "control", ts+300)
	p.submit(t, []store.Claim{control})
	waitFor(t, 10*time.Second, "the control claim on V", func() bool { return v.holds(control) })

	stop := replayEvery(t, topic, old)
	waitFor(t, 10*time.Second, "V to see 10 stale claims", func() bool { return v.sw.GossipClaims("stale") >= 10 })
	fresh := writer.Text(testCID(3), "title", "new work", uint64(time.Now().UnixMilli()))
	p.submit(t, []store.Claim{fresh})
	waitFor(t, 10*time.Second, "V to store the writer's new claim relayed during the replay", func() bool { return v.holds(fresh) })
	stop()
	if r := v.sw.GossipClaims("ratelimited"); r != 0 {
		t.Errorf("V rate-limited %v claims of the writer", r)
	}
	if bad := bad.ID(); v.sw.Struck(bad) {
		t.Error("V struck the replaying peer: genuine claims, however old, are no fault")
	}
}

// TestGossip_StaleReplayNotForwarded: a message of stale claims only is
// ignored, not forwarded. Else a stranger's replay of a few superseded
// claims, re-sent in new messages, is charged downstream to the honest
// relay's own per-peer budget, and the relay's genuine traffic of every
// signer is dropped. D's rate for its peers scaled to 1/s (burst 5); the
// replay sends one stale claim every 25 ms. No sync runs.
func TestGossip_StaleReplayNotForwarded(t *testing.T) {
	ctx := context.Background()
	mn := newMocknet(t)
	writer, other := mustSigner(t), mustSigner(t)
	v := newNode(t, nodeOpt{mn: mn, trust: store.TrustList, swarm: noAutoSync})
	d := newNode(t, nodeOpt{mn: mn, trust: store.TrustList, swarm: func(c *swarm.Config) { c.GossipRate, c.NoAutoSync = 1, true }})
	for _, n := range []*node{v, d} {
		for _, s := range []*store.Signer{writer, other} {
			if err := n.st.Trust(ctx, s.UID(), "test"); err != nil {
				t.Fatal(err)
			}
		}
	}
	linkConnect(t, mn, v, d)
	_, topic := swarm.NewGossipAttacker(t, mn, v.id, v.sw.Topic())
	ts := uint64(time.Now().UnixMilli()) - 60_000
	old := versions(writer, testCID(1), 120, ts)
	current := writer.Text(testCID(1), "title", "current", ts+200)
	v.submit(t, []store.Claim{current})
	d.submit(t, []store.Claim{current})
	waitMeshed(t, [2]*node{v, d})
	// V's own copy of current may reach D while D stores it, and count
	// there as stale: only what comes after counts.
	staleBefore := d.sw.GossipClaims("stale")

	stop := replayEvery(t, topic, old)
	waitFor(t, 10*time.Second, "V to see 10 stale claims", func() bool { return v.sw.GossipClaims("stale") >= 10 })
	genuine := other.Text(testCID(2), "title", "genuine", uint64(time.Now().UnixMilli()))
	v.submit(t, []store.Claim{genuine})
	waitFor(t, 10*time.Second, "D to take V's genuine claim of another signer during the replay", func() bool { return d.holds(genuine) })
	stop()
	if n := d.sw.GossipClaims("stale") - staleBefore; n != 0 {
		t.Errorf("V forwarded %v stale claims to D", n)
	}
}

// TestGossip_FrontRunVouchStillRelayedLive: R7-T3 for a vouch (review 9,
// R9-3). A stranger
// front-runs a home's vouch for a new writer N together with N's first
// claim (the way a home publishes them) and one junk claim. H (list,
// trusts the home's key W) ignores the message; admitVouched stores the
// vouch itself, so when the relay batch is submitted the vouch is
// Unchanged, not Stored, and H re-publishes N's claim without the vouch.
// D (list, trusts W) cannot take N's claim without it, and the genuine
// message, all known at H, is not forwarded: D gets neither live. The
// vouch must also travel in the same message as the claim: sent apart,
// D validated both concurrently and refused the claim under load (CI).
func TestGossip_FrontRunVouchStillRelayedLive(t *testing.T) {
	ctx := context.Background()
	mn := newMocknet(t)
	home, writerN, stranger := mustSigner(t), mustSigner(t), mustSigner(t)
	p := newNode(t, nodeOpt{mn: mn, swarm: noAutoSync}) // the origin (open)
	h := newNode(t, nodeOpt{mn: mn, trust: store.TrustList, swarm: noAutoSync})
	d := newNode(t, nodeOpt{mn: mn, trust: store.TrustList, swarm: noAutoSync})
	for _, n := range []*node{h, d} {
		if err := n.st.Trust(ctx, home.UID(), "test"); err != nil {
			t.Fatal(err)
		}
	}
	linkConnect(t, mn, p, h)
	linkConnect(t, mn, h, d)
	_, topic := swarm.NewGossipAttacker(t, mn, h.id, h.sw.Topic())
	ts := uint64(time.Now().UnixMilli()) - 1000

	waitMeshed(t, [2]*node{p, h}, [2]*node{h, d})
	// Control: a vouch for another new writer and its first claim, published
	// by P, reach D live through H.
	writerC := mustSigner(t)
	control := []store.Claim{vouch(t, home, writerC.UID(), ts), writerC.Text(testCID(800), "title", "control", ts)}
	p.submit(t, control)
	waitFor(t, 10*time.Second, "the control vouch and claim to reach D through H", func() bool { return d.holds(control...) })

	v := vouch(t, home, writerN.UID(), ts+1)
	first := writerN.Text(testCID(801), "title", "first", ts+2)
	junk := stranger.Text(testCID(900), "title", "junk", ts)
	if err := topic.Publish(ctx, swarm.EncodeGossip([]store.Claim{v, first, junk})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "H to store the front-run vouch and claim", func() bool { return h.holds(v, first) })
	p.submit(t, []store.Claim{v, first}) // the genuine message: all known at H
	deadline := time.Now().Add(10 * time.Second)
	for !d.holds(v, first) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !d.holds(v, first) {
		t.Errorf("D did not get the front-run vouch and N's claim live through H (no sync runs): vouch %v, claim %v",
			d.holds(v), d.holds(first))
		t.Logf("H: stale=%v new=%v untrusted=%v; D: untrusted=%v new=%v", h.sw.GossipClaims("stale"), h.sw.GossipClaims("new"),
			h.sw.GossipClaims("untrusted"), d.sw.GossipClaims("untrusted"), d.sw.GossipClaims("new"))
	}
}
