package swarm_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

// Pairing: the inviter sees the joiner's uid (from its authenticated peer
// id) and the token; a refusal carries the inviter's reason to the joiner.
func TestPair(t *testing.T) {
	mn := newMocknet(t)
	var mu sync.Mutex
	var asked []string
	inviter := newNode(t, nodeOpt{mn: mn, swarm: func(c *swarm.Config) {
		c.OnPair = func(_ context.Context, uid string, token []byte) swarm.PairAnswer {
			mu.Lock()
			asked = append(asked, uid)
			mu.Unlock()
			if string(token) != "good token" {
				return swarm.PairAnswer{Message: "unknown or expired invite"}
			}
			return swarm.PairAnswer{OK: true, Claims: 42}
		}
	}})
	joiner := newNode(t, nodeOpt{mn: mn})
	if err := mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	ans, err := joiner.sw.Pair(ctx, inviter.sw.Addrs(), []byte("bad token"))
	if !errors.Is(err, swarm.ErrPairRefused) || ans.OK || ans.Message != "unknown or expired invite" {
		t.Fatalf("bad token: %+v, %v", ans, err)
	}
	ans, err = joiner.sw.Pair(ctx, inviter.sw.Addrs(), []byte("good token"))
	if err != nil || !ans.OK || ans.Claims != 42 {
		t.Fatalf("good token: %+v, %v", ans, err)
	}
	mu.Lock()
	if len(asked) != 2 || asked[0] != joiner.signer.UID() || asked[1] != joiner.signer.UID() {
		t.Fatalf("inviter saw uids %v, want the joiner's %s twice", asked, joiner.signer.UID())
	}
	mu.Unlock()

	// A node without an OnPair refuses; bad arguments fail before dialing.
	if _, err := inviter.sw.Pair(ctx, joiner.sw.Addrs(), []byte("x")); !errors.Is(err, swarm.ErrPairRefused) {
		t.Fatalf("pairing with a node that takes none: %v", err)
	}
	if _, err := joiner.sw.Pair(ctx, inviter.sw.Addrs(), make([]byte, swarm.MaxPairToken+1)); err == nil {
		t.Fatal("oversized token accepted")
	}
	if _, err := joiner.sw.Pair(ctx, append(inviter.sw.Addrs(), joiner.sw.Addrs()...), []byte("good token")); err == nil {
		t.Fatal("addresses of two peers accepted")
	}
}

func TestPeerUID(t *testing.T) {
	s, err := store.GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	id, err := swarm.PeerIDOf(s)
	if err != nil {
		t.Fatal(err)
	}
	if uid, err := swarm.PeerUID(id); err != nil || uid != s.UID() {
		t.Fatalf("PeerUID = %q, %v; want %s", uid, err, s.UID())
	}
}
