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
