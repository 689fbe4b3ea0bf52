package swarm_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

// One signer past its gossip rate is held back whoever relays it (no
// penalty for the relay); another signer's claims still pass, and the held
// back claims arrive by sync.
func TestGossip_SignerRateLimit(t *testing.T) {
	mn := newMocknet(t)
	a := newNode(t, nodeOpt{mn: mn, swarm: func(c *swarm.Config) { c.NoAutoSync = true }})
	b := newNode(t, nodeOpt{mn: mn, swarm: func(c *swarm.Config) { c.NoAutoSync = true; c.SignerRate = 10 }})
	linkConnect(t, mn, a, b)
	waitForMesh(t, []*node{a, b})

	flood, _ := store.GenerateSigner()
	ts := uint64(time.Now().UnixMilli()) - 10_000
	a.submit(t, signMany(flood, 0, 200, ts)) // a burst of 50 passes, the rest is held back
	waitFor(t, 20*time.Second, "the flood to hit the signer limit", func() bool {
		return b.sw.GossipClaims("ratelimited") > 0
	})
	if n, _ := b.setOf(); n >= 200 {
		t.Fatalf("b took all %d claims of one signer by gossip despite the limit", n)
	}
	if b.sw.Struck(a.id) {
		t.Fatal("the relaying peer was penalised for another signer's flood")
	}
	if _, err := b.sw.SyncWith(context.Background(), a.id); err != nil {
		t.Fatal(err)
	}
	waitSame(t, 20*time.Second, 200, a, b)

	other, _ := store.GenerateSigner()
	a.submit(t, signMany(other, 1000, 5, ts))
	waitSame(t, 20*time.Second, 205, a, b)
}

// One peer may run only a couple of sync sessions against a node at once:
// the next is refused as busy while the others hold their slots.
func TestSync_SessionsPerPeer(t *testing.T) {
	mn := newMocknet(t)
	victim := newNode(t, nodeOpt{mn: mn})
	attacker := attackerOf(t, mn, victim)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 2 { // two idle sessions: they hold their slots
		st, err := attacker.NewStream(ctx, victim.id, swarm.ProtocolSync)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Reset()
		_, _ = st.Write([]byte{}) // make the stream reach the handler
		waitFor(t, 10*time.Second, "the session to start", func() bool { return victim.sw.InboundSessions(attacker.ID()) == i+1 })
	}
	st, err := attacker.NewStream(ctx, victim.id, swarm.ProtocolSync)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Reset()
	_ = st.CloseWrite()
	b, err := io.ReadAll(io.LimitReader(st, 4096))
	if err != nil {
		t.Fatal(err)
	}
	// One ERROR frame: length, 0x06, code 1 (busy), message.
	if len(b) < 3 || b[1] != 0x06 || b[2] != 1 {
		t.Fatalf("third session answered %x, want an ERROR frame with code busy", b)
	}
}

// Claims forged in a trusted signer's name are rejected without spending
// that signer's gossip budget: otherwise anyone could silence a signer's
// live gossip by forging a few of its claims.
func TestGossip_ForgedClaimsDoNotSpendSignerRate(t *testing.T) {
	mn := newMocknet(t)
	noSync := func(c *swarm.Config) { c.NoAutoSync = true }
	victim := newNode(t, nodeOpt{mn: mn, swarm: func(c *swarm.Config) { c.NoAutoSync = true; c.SignerRate = 1 }}) // burst 5
	honest := newNode(t, nodeOpt{mn: mn, swarm: noSync})
	linkConnect(t, mn, victim, honest)
	waitForMesh(t, []*node{victim, honest})
	bad, topic := gossipAttacker(t, mn, victim)

	w, _ := store.GenerateSigner()
	ts := uint64(time.Now().UnixMilli()) - 1000
	forged := signMany(w, 100, 5, ts)
	for i := range forged {
		forged[i].Value = []byte("altered after signing")
	}
	if err := topic.Publish(context.Background(), swarm.EncodeGossip(forged)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the forger to be held to account", func() bool { return victim.sw.Struck(bad.ID()) })
	genuine := signMany(w, 0, 5, ts)
	honest.submit(t, genuine)
	waitFor(t, 20*time.Second, "the genuine claims by gossip", func() bool {
		return victim.holds(genuine...) || victim.sw.GossipClaims("ratelimited") > 0
	})
	if n := victim.sw.GossipClaims("ratelimited"); n > 0 {
		t.Fatalf("%v genuine claims were held back: the forged ones spent their signer's budget", n)
	}
}
