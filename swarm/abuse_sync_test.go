package swarm_test

import (
	"context"
	"encoding/binary"
	"io"
	"slices"
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
	// The victim starts the connection's and the topic join's sessions when
	// its peer id is the lower one; the honest node starts none.
	var base int64
	if victim.id < honest.id {
		base = 2
	}
	waitFor(t, 10*time.Second, "the connection's sessions", func() bool { return honest.sw.Counters().Sessions >= base })
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

// forgedClaims returns n claims of a fresh signer with broken signatures
// (R flipped: still canonical), 1 ms apart: what a stranger with no key a
// node trusts can make for free.
func forgedClaims(t *testing.T, n int) []store.Claim {
	t.Helper()
	one := signMany(mustSigner(t), 0, 1, uint64(time.Now().UnixMilli())-600_000)[0]
	out := make([]store.Claim, n)
	for i := range out {
		c := one
		c.TS += uint64(i)
		c.Sig[3] ^= 0xff
		out[i] = c
	}
	return out
}

func claimsFrame(claims []store.Claim) []byte {
	body := binary.AppendUvarint([]byte{2}, uint64(len(claims)))
	for i := range claims {
		body = claims[i].AppendWire(body)
	}
	return frame(body...)
}

// TestSync_RefusedBytesDoNotBuySessionTime: a session's lifetime grows
// with the work it does, so that an honest bulk catch-up is not cut. Claims
// the node sets aside unverified (signers it does not trust) are no work
// for it: a stranger streaming them keeps its inbound slot no longer than
// the base lifetime. Limits scaled down: idle 2 s, lifetime 1 s plus 1 s
// per 256 KiB of work.
func TestSync_RefusedBytesDoNotBuySessionTime(t *testing.T) {
	mn := newMocknet(t)
	victim := newNode(t, nodeOpt{mn: mn, trust: store.TrustList, noOpen: true})
	victim.sw.SetSessionLimits(2*time.Second, time.Second, 256<<10, time.Hour)
	victim.open(t)
	f := claimsFrame(forgedClaims(t, 300)) // ~60 KB
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := rawSyncStream(ctx, t, mn, victim)
	if _, err := st.Write(frame(1, 1, 0, 0)); err != nil { // HELLO
		t.Fatal(err)
	}
	cut := make(chan struct{})
	go func() {
		defer close(cut)
		_, _ = io.Copy(io.Discard, st)
	}()
	// 100 frames at ~600 KB/s would buy ~23 s if bytes counted; the bound
	// is in frames, not time.
	sent := 0
	for ; sent < 100; sent++ {
		if _, err := st.Write(f); err != nil {
			break
		}
		select {
		case <-cut:
		case <-time.After(100 * time.Millisecond):
			continue
		}
		break
	}
	<-cut
	t.Logf("the stranger's session ended after %d frames of %d B", sent, len(f))
	if sent >= 100 {
		t.Fatalf("claims the node set aside unverified kept a stranger's session alive for %d frames (base lifetime 1 s)", sent)
	}
}

// TestSync_RefusedClaimsCappedPerSession: one session takes at most so
// many claims of signers the node does not trust (it only remembers them
// as refused); past that the session ends, whatever its lifetime allows.
func TestSync_RefusedClaimsCappedPerSession(t *testing.T) {
	mn := newMocknet(t)
	victim := newNode(t, nodeOpt{mn: mn, trust: store.TrustList})
	const n = 1 << 16 // twice the cap
	claims := forgedClaims(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st := rawSyncStream(ctx, t, mn, victim)
	cut := make(chan struct{})
	go func() {
		defer close(cut)
		_, _ = io.Copy(io.Discard, st)
	}()
	if _, err := st.Write(frame(1, 1, 0, 0)); err != nil { // HELLO
		t.Fatal(err)
	}
	for chunk := range slices.Chunk(claims, 1024) {
		if _, err := st.Write(claimsFrame(chunk)); err != nil {
			break
		}
	}
	_, _ = st.Write(frame(5))
	_ = st.CloseWrite()
	<-cut
	got := victim.sw.RefusedLen()
	t.Logf("a stranger pushed %d untrusted claims in one session: %d taken", n, got)
	if got >= n {
		t.Fatalf("one session took all %d claims of a signer the node does not trust", n)
	}
}
