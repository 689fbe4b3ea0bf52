package swarm

import (
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/p2p/net/connmgr"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// A home's host as built: at most 64 connections by default (low water
// 3/4), bootstrap peers protected from trimming, TCP and QUIC listeners on
// a public swarm.
func TestHost_Defaults(t *testing.T) {
	signer := storetest.Signer(400)
	boot := storetest.Signer(401)
	bootID, err := PeerIDOf(boot)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Identity: signer, Store: storetest.Open(t, store.Config{OwnUID: signer.UID()}),
		Listen:    []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"},
		Bootstrap: []string{"/ip4/127.0.0.1/tcp/1/p2p/" + bootID.String()}, // nobody there
		Name:      "t", SyncInterval: time.Hour, Logger: storetest.Logger(t, 8)})
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	cm, ok := s.host.ConnManager().(*connmgr.BasicConnMgr)
	if !ok {
		t.Fatalf("connection manager %T", s.host.ConnManager())
	}
	if info := cm.GetInfo(); info.HighWater != 64 || info.LowWater != 48 {
		t.Fatalf("connection manager high %d low %d, want 64 and 48", info.HighWater, info.LowWater)
	}
	if !s.host.ConnManager().IsProtected(bootID, "bootstrap") {
		t.Fatal("the bootstrap peer is not protected")
	}
	var tcp, quic bool
	for _, a := range s.Addrs() {
		tcp = tcp || strings.Contains(a, "/tcp/")
		quic = quic || strings.Contains(a, "/quic-v1/")
	}
	if !tcp || !quic {
		t.Fatalf("listening on %v, want TCP and QUIC", s.Addrs())
	}
}
