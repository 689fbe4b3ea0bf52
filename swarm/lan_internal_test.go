package swarm

import (
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// The LAN peer set redials a dropped peer at once, then backs off
// (doubling, with jitter, up to lanBackoffMax), starts afresh once the
// peer is back, forgets a peer gone longer than lanForget, and holds at
// most maxLANPeers, dropping the one gone longest.
func TestLANPeers(t *testing.T) {
	var l lanPeers
	t0 := time.Unix(1_700_000_000, 0)
	a := peer.AddrInfo{ID: "a"}
	up := map[peer.ID]bool{}
	isUp := func(p peer.ID) bool { return up[p] }
	dueAt := func(now time.Time) []peer.AddrInfo { return l.due(now, isUp) }

	l.add(a, t0)
	if got := dueAt(t0); len(got) != 1 || got[0].ID != "a" {
		t.Fatalf("a dropped peer is not due at once: %v", got)
	}
	now := t0
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		l.failed("a", now)
		if got := dueAt(now.Add(want - time.Millisecond)); len(got) != 0 {
			t.Fatalf("failure %d: due again before %v", i+1, want)
		}
		now = now.Add(want + want/2) // past the backoff and its jitter
		if got := dueAt(now); len(got) != 1 {
			t.Fatalf("failure %d: not due after %v", i+1, want+want/2)
		}
	}
	for range 20 {
		l.failed("a", now)
	}
	if b := l.peers["a"].backoff; b != lanBackoffMax {
		t.Fatalf("backoff %v, want the cap %v", b, lanBackoffMax)
	}

	up["a"] = true // back: seen now, backoff reset
	if got := dueAt(now); len(got) != 0 || l.peers["a"].backoff != 0 {
		t.Fatalf("a connected peer is due (%v) or keeps its backoff", got)
	}
	up["a"] = false
	if got := dueAt(now.Add(lanForget)); len(got) != 1 {
		t.Fatal("a peer gone for lanForget is already forgotten")
	}
	dueAt(now.Add(lanForget + time.Second))
	if l.len() != 0 {
		t.Fatal("a peer gone longer than lanForget is still remembered")
	}

	for i := range maxLANPeers + 1 {
		l.add(peer.AddrInfo{ID: peer.ID(fmt.Sprint("p", i))}, t0.Add(time.Duration(i)*time.Second))
	}
	if l.len() != maxLANPeers {
		t.Fatalf("%d LAN peers held, bound %d", l.len(), maxLANPeers)
	}
	if _, ok := l.peers["p0"]; ok {
		t.Fatal("the peer gone longest was kept over newer ones")
	}
}
