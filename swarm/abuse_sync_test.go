package swarm_test

import (
	"context"
	"encoding/binary"
	"io"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

// TestSync_KnownClaimsDoNotCascade: after a session that brought claims
// in, the node reconciles with every other peer. Claims it already held
// brought nothing in: a peer re-sending them (a stranger, or overlapping
// gossip and sync) must neither start those sessions nor count as claims
// received.
func TestSync_KnownClaimsDoNotCascade(t *testing.T) {
	mn := newMocknet(t)
	victim := newNode(t, nodeOpt{mn: mn})
	honest := newNode(t, nodeOpt{mn: mn, swarm: func(c *swarm.Config) { c.NoAutoSync = true }})
	w, _ := store.GenerateSigner()
	claims := signMany(w, 0, 5, uint64(time.Now().UnixMilli())-1000)
	victim.submit(t, claims)
	honest.submit(t, claims)
	linkConnect(t, mn, victim, honest)
	time.Sleep(3 * time.Second) // the connection's and the topic join's sessions
	base := honest.sw.Counters().Sessions
	recvd := victim.sw.Counters().ClaimsRecvd

	const pushes = 3
	for i := range pushes {
		sessions := victim.sw.Counters().Sessions
		pushRaw(t, mn, victim, claims[i:i+1]) // one claim the victim holds, a final turn
		waitFor(t, 10*time.Second, "the victim to record the session", func() bool {
			return victim.sw.Counters().Sessions > sessions
		})
		time.Sleep(1200 * time.Millisecond) // past cascadeDelay and one session
	}
	if got := victim.sw.Counters().ClaimsRecvd - recvd; got != 0 {
		t.Errorf("claims the victim already held counted as %d claims received", got)
	}
	if got := honest.sw.Counters().Sessions - base; got != 0 {
		t.Fatalf("%d pushes of claims the victim held made it reconcile with its other peer %d times", pushes, got)
	}
}

// TestSync_BadRangesStrike: a RANGES frame no honest peer sends (a count
// past the turn's limit) ends the session and is held against the peer,
// as a bad CLAIMS frame is; a repeat blocks it.
func TestSync_BadRangesStrike(t *testing.T) {
	mn := newMocknet(t)
	victim := newNode(t, nodeOpt{mn: mn})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st := rawSyncStream(ctx, t, mn, victim)
	body := binary.AppendUvarint([]byte{4}, 200_000) // RANGES: 200,000 skips
	for range 200_000 {
		body = append(body, 2, 0, 0)
	}
	in := append(frame(1, 1, 0, 0), frame(body...)...) // HELLO, RANGES
	if _, err := st.Write(in); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, st) // the victim resets the stream
	if !victim.sw.Struck(attackerPeer(st)) {
		t.Fatal("a peer sending 200,000 ranges in one frame was not held to account")
	}
}
