package swarm

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
)

// newGossipAttacker is a bare gossipsub host on topic, connected to
// victim on mn, with the swarm's message rules (no signatures, content
// ids): what an attacker that skips our validator would run. It returns
// once the attacker sees the victim on the topic.
func newGossipAttacker(t *testing.T, mn mocknet.Mocknet, victim peer.ID, topicName string) (host.Host, *pubsub.Topic) {
	t.Helper()
	bad, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mn.LinkPeers(bad.ID(), victim); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ps, err := pubsub.NewGossipSub(ctx, bad, pubsub.WithMessageSignaturePolicy(pubsub.StrictNoSign),
		pubsub.WithNoAuthor(), pubsub.WithFloodPublish(true),
		pubsub.WithMessageIdFn(func(m *pb.Message) string { h := sha256.Sum256(m.Data); return string(h[:]) }))
	if err != nil {
		t.Fatal(err)
	}
	topic, err := ps.Join(topicName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = topic.Close() })
	if _, err := mn.ConnectPeers(bad.ID(), victim); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(topic.ListPeers()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the attacker never saw the victim on the topic")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return bad, topic
}

// connectedPeer is a bare host on mn, linked and connected to victim: a
// peer that speaks the protocols by hand.
func connectedPeer(t *testing.T, mn mocknet.Mocknet, victim peer.ID) host.Host {
	t.Helper()
	h, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mn.LinkPeers(h.ID(), victim); err != nil {
		t.Fatal(err)
	}
	if _, err := mn.ConnectPeers(h.ID(), victim); err != nil {
		t.Fatal(err)
	}
	return h
}
