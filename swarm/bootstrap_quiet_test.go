package swarm_test

import (
	"testing"
	"time"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
	"github.com/metanode/metanode/swarm"
)

// TestBootstrap_UnreachableIsReported: a node none of whose bootstrap
// peers answers logs a warning naming them once they have been out of
// reach for bootstrapQuiet (review s11 B2: a stale address left a node at
// 0 peers, health ok, not a word), even when the list names the node
// itself (review s11 C5).
func TestBootstrap_UnreachableIsReported(t *testing.T) {
	signer, boot := storetest.Signer(410), storetest.Signer(411)
	bootID, err := swarm.PeerIDOf(boot)
	if err != nil {
		t.Fatal(err)
	}
	selfID, err := swarm.PeerIDOf(signer)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logCapture{}
	s := swarm.New(swarm.Config{Identity: signer, Store: storetest.Open(t, store.Config{OwnUID: signer.UID()}),
		Listen: []string{"/ip4/127.0.0.1/tcp/0"},
		// Nobody there, and this node itself (a list shared by the nodes
		// of a swarm), which must not count as a bootstrap peer reached.
		// The bootstrap peer by two addresses: one peer to dial and count.
		Bootstrap: []string{"/ip4/127.0.0.1/tcp/1/p2p/" + bootID.String(), "/ip4/127.0.0.1/tcp/2/p2p/" + selfID.String(),
			"/ip6/::1/tcp/1/p2p/" + bootID.String()},
		Name: "t", SyncInterval: time.Hour, Logger: logs.logger()})
	s.SetBootstrapQuiet(300 * time.Millisecond)
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	addr := "/ip4/127.0.0.1/tcp/1/p2p/" + bootID.String()
	for deadline := time.Now().Add(10 * time.Second); !logs.has("level=WARN", "no bootstrap peer reachable", addr); {
		if time.Now().After(deadline) {
			t.Fatal("no warning naming the unreachable bootstrap peer's address in the log")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Only a warning: an unreachable bootstrap peer alone is no problem
	// in the status, which would make /health degraded.
	st := s.Status()
	if len(st.Errors) != 0 {
		t.Errorf("status errors %q", st.Errors)
	}
	if st.Bootstrap != 1 { // what /health counts as configured
		t.Errorf("status counts %d bootstrap peers, want 1 (not itself)", st.Bootstrap)
	}
}
