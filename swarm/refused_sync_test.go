package swarm_test

import (
	"context"
	"encoding/binary"
	"io"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/p2p/net/mock"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

// pushRaw sends one final turn (HELLO, CLAIMS, END) of claims to victim
// from a bare host, as any peer can, and reads the victim's answer.
func pushRaw(t *testing.T, mn mocknet.Mocknet, victim *node, claims []store.Claim) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st := rawSyncStream(ctx, t, mn, victim)
	body := binary.AppendUvarint([]byte{2}, uint64(len(claims)))
	for i := range claims {
		body = claims[i].AppendWire(body)
	}
	in := append(frame(1, 1, 0, 0), frame(body...)...)
	in = append(in, frame(5)...)
	if _, err := st.Write(in); err != nil {
		t.Fatal(err)
	}
	_ = st.CloseWrite()
	_, _ = io.Copy(io.Discard, st)
}

// TestSync_RefusedBurstsConverge: two list-mode homes that hold the same
// claims and refused different parts of one burst of an untrusted signer's
// claims (each heard it from a relaying open-trust node at a different
// time) finish their sessions, every time, moving nothing.
func TestSync_RefusedBurstsConverge(t *testing.T) {
	t.Run("signed burst", func(t *testing.T) { refusedBursts(t, false) })
	// Claims of signers a node does not trust are remembered unverified
	// (docs/protocols.md), so a stranger with no key can plant such bursts:
	// they must not break sessions between two homes either.
	t.Run("forged burst pushed by a stranger", func(t *testing.T) { refusedBursts(t, true) })
}

func refusedBursts(t *testing.T, forge bool) {
	mn := newMocknet(t)
	noSync := func(c *swarm.Config) { c.NoAutoSync = true }
	a := newNode(t, nodeOpt{mn: mn, trust: store.TrustList, swarm: noSync})
	b := newNode(t, nodeOpt{mn: mn, trust: store.TrustList, swarm: noSync})
	u := mustSigner(t)                                                  // trusted by neither
	burst := signMany(u, 0, 100, uint64(time.Now().UnixMilli())-60_000) // 100 claims, 1 ms apart
	if forge {
		for i := range burst {
			burst[i].Sig[3] ^= 0xff // R, not S: still canonical
		}
	}
	pushRaw(t, mn, a, burst) // a heard all 100
	waitFor(t, 10*time.Second, "a's refusals", func() bool { return a.sw.RefusedLen() == 100 })
	pushRaw(t, mn, b, burst[:40]) // b the first 40
	waitFor(t, 10*time.Second, "b's refusals", func() bool { return b.sw.RefusedLen() == 40 })
	linkConnect(t, mn, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 2 {
		st, err := a.sw.SyncWith(ctx, b.id)
		if err != nil {
			t.Fatalf("session %d between two homes with the same claims: %d turns, %v", i+1, st.Turns, err)
		}
		if st.ClaimsMoved != 0 || st.ClaimsSent != 0 {
			t.Fatalf("session %d moved %d and sent %d claims between two homes with the same claims", i+1, st.ClaimsMoved, st.ClaimsSent)
		}
		t.Logf("session %d: %d turns, %d bytes sent, %d received", i+1, st.Turns, st.BytesSent, st.BytesRecvd)
	}
}
