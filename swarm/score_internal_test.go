package swarm

import (
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// Promise 5 in gossipsub's own terms: one invalid delivery (below the
// node's own blocking threshold) already costs the sender peer score, so
// gossipsub stops meshing with it and graylists it after a second one.
func TestGossip_InvalidDeliveryLowersScore(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	signer := storetest.Signer(300)
	sk, err := PeerKey(signer)
	if err != nil {
		t.Fatal(err)
	}
	h, err := mn.AddPeer(sk, ma.StringCast("/ip4/10.2.0.1/tcp/4001"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	scores := map[peer.ID]float64{}
	s := New(Config{Identity: signer, Store: storetest.Open(t, store.Config{OwnUID: signer.UID()}), Host: h,
		Name: "t", SyncInterval: time.Hour, Logger: storetest.Logger(t, 8)})
	s.scoreInspect = func(m map[peer.ID]float64) {
		mu.Lock()
		defer mu.Unlock()
		clear(scores)
		for p, v := range m {
			scores[p] = v
		}
	}
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })

	bad, topic := newGossipAttacker(t, mn, h.ID(), s.Topic())
	score := func() (float64, bool) {
		mu.Lock()
		defer mu.Unlock()
		v, ok := scores[bad.ID()]
		return v, ok
	}
	forger, _ := store.GenerateSigner()
	c := forger.Text("bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy", "title", "forged", uint64(time.Now().UnixMilli()))
	c.Value = []byte("altered after signing")
	if err := topic.Publish(t.Context(), encodeGossip([]store.Claim{c})); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if v, ok := score(); ok && v < 0 {
			break
		}
		if time.Now().After(deadline) {
			v, _ := score()
			t.Fatalf("the sender of an invalid message keeps score %v", v)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s.penalties.isBlocked(bad.ID()) {
		t.Fatal("one invalid delivery blocked the peer: the score, not the block, should have acted")
	}
}
