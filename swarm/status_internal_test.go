package swarm

import (
	"errors"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
)

// TestPeerStats_FailedSessionCountsForScheduling: a failed session leaves
// LastSync as it was but moves the peer back in the periodic order, so
// peers whose sessions always fail cannot take every periodic slot.
func TestPeerStats_FailedSessionCountsForScheduling(t *testing.T) {
	ps := newPeerStats()
	good, failing := peer.ID("good"), peer.ID("failing")
	ps.synced(SyncStats{Peer: good})
	ps.synced(SyncStats{Peer: failing, Err: errors.New("stream reset")})
	if e, _ := ps.get(failing); !e.LastSync.IsZero() {
		t.Fatal("a failed session set LastSync")
	}
	if !ps.lastTry(good).Before(ps.lastTry(failing)) && !ps.lastTry(good).Equal(ps.lastTry(failing)) {
		t.Fatalf("order: good tried %v, failing %v", ps.lastTry(good), ps.lastTry(failing))
	}
	if ps.lastTry(failing).IsZero() {
		t.Fatal("a failed session is not remembered for scheduling: it would come first every time")
	}
}
