package swarm_test

import (
	"context"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

// TestGossip_StaleLinkStillJoins: a live link that arrives by gossip after
// its signer's retraction is older than the row, yet the store keeps every
// live link as a group edge (groups must not depend on arrival order), so
// the gossip stale check must let it through: the node joins the two
// records as a node that took the same claims by Submit does (review 8,
// R8-1).
func TestGossip_StaleLinkStillJoins(t *testing.T) {
	ctx := context.Background()
	mn := newMocknet(t)
	w := mustSigner(t)
	v := newNode(t, nodeOpt{mn: mn, swarm: noAutoSync})
	ctrl := newNode(t, nodeOpt{mn: mn, swarm: noAutoSync})
	_, topic := swarm.NewGossipAttacker(t, mn, v.id, v.sw.Topic())
	ts := uint64(time.Now().UnixMilli()) - 60_000
	a, b := testCID(1), testCID(2)
	link := w.Text(a, store.LinkPrefix+b, "true", ts)
	unlink := w.Retraction(a, store.LinkPrefix+b, ts+1)
	desc := []store.Claim{w.Text(a, "title", "A", ts), w.Text(b, "title", "B", ts), unlink}
	joined := func(n *node) bool {
		ra, err1 := n.st.Resolve(ctx, a)
		rb, err2 := n.st.Resolve(ctx, b)
		return err1 == nil && err2 == nil && ra == rb
	}

	ctrl.submit(t, desc)
	if _, err := ctrl.st.Submit(ctx, []store.Claim{link}, store.SubmitOptions{Origin: store.OriginPeer}); err != nil {
		t.Fatal(err)
	}
	if !joined(ctrl) {
		t.Fatal("control: the store did not join a and b for a link after its retraction")
	}
	v.submit(t, desc)
	if joined(v) {
		t.Fatal("a and b joined before the link")
	}
	waitFor(t, 15*time.Second, "the gossiped link to join a and b", func() bool {
		_ = topic.Publish(ctx, swarm.EncodeGossip([]store.Claim{link}))
		time.Sleep(100 * time.Millisecond)
		return joined(v)
	})
	if n := v.sw.GossipClaims("stale"); n != 0 {
		t.Errorf("%v claims counted stale, want 0 (the link changes the groups)", n)
	}
}

// oldLinks signs n links a -> b_i (ts+i) and their retractions (ts+500+i):
// a signer's ordinary history of links it made and undid.
func oldLinks(w *store.Signer, a string, n int, ts uint64) (links, unlinks []store.Claim) {
	for i := range n {
		b := testCID(1000 + i)
		links = append(links, w.Text(a, store.LinkPrefix+b, "true", ts+uint64(i)))
		unlinks = append(unlinks, w.Retraction(a, store.LinkPrefix+b, ts+500+uint64(i)))
	}
	return links, unlinks
}

// TestGossip_ReplayedOldLinksSpendNoSignerBudget: V holds a signer's old
// links and their retractions (every link is a group edge already).
// Replaying those old links changes nothing on V, so they are stale and
// spend no budget: a link is "new" only until its edge is stored (review
// 9, R9-2; TestGossip_StaleLinkStillJoins is the other side). Same set-up
// as TestGossip_StaleReplaySpendsNoSignerBudget.
func TestGossip_ReplayedOldLinksSpendNoSignerBudget(t *testing.T) {
	ctx := context.Background()
	mn := newMocknet(t)
	writer := mustSigner(t)
	p := newNode(t, nodeOpt{mn: mn, swarm: noAutoSync})
	v := newNode(t, nodeOpt{mn: mn, trust: store.TrustList, swarm: func(c *swarm.Config) { c.SignerRate, c.NoAutoSync = 1, true }})
	if err := v.st.Trust(ctx, writer.UID(), "test"); err != nil {
		t.Fatal(err)
	}
	linkConnect(t, mn, p, v)
	_, topic := swarm.NewGossipAttacker(t, mn, v.id, v.sw.Topic())
	ts := uint64(time.Now().UnixMilli()) - 60_000
	a := testCID(1)
	links, unlinks := oldLinks(writer, a, 120, ts)
	v.submit(t, append([]store.Claim{writer.Text(a, "title", "A", ts)}, links...))
	v.submit(t, unlinks)
	waitMeshed(t, [2]*node{p, v})
	control := writer.Text(testCID(2), "title", "control", ts+900)
	p.submit(t, []store.Claim{control})
	waitFor(t, 10*time.Second, "the control claim on V", func() bool { return v.holds(control) })
	newBefore := v.sw.GossipClaims("new")

	stop := replayEvery(t, topic, links)
	waitFor(t, 10*time.Second, "V to see 10 replayed links", func() bool {
		return v.sw.GossipClaims("new")-newBefore+v.sw.GossipClaims("stale")+v.sw.GossipClaims("ratelimited") >= 10
	})
	t.Logf("during replay: new=%v stale=%v ratelimited=%v", v.sw.GossipClaims("new")-newBefore, v.sw.GossipClaims("stale"), v.sw.GossipClaims("ratelimited"))
	fresh := writer.Text(testCID(3), "title", "new work", uint64(time.Now().UnixMilli()))
	p.submit(t, []store.Claim{fresh})
	deadline := time.Now().Add(10 * time.Second)
	for !v.holds(fresh) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	got := v.holds(fresh)
	stop()
	t.Logf("after: new=%v stale=%v ratelimited=%v", v.sw.GossipClaims("new")-newBefore, v.sw.GossipClaims("stale"), v.sw.GossipClaims("ratelimited"))
	if !got {
		t.Error("V dropped the writer's new claim relayed during a replay of its old (retracted, already-joined) links: the replay spent its budget")
	}
	if r := v.sw.GossipClaims("ratelimited"); r != 0 {
		t.Errorf("V rate-limited %v claims of the writer", r)
	}
}
