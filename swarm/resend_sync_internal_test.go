package swarm

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"github.com/metanode/metanode/store"
)

// rawSyncSession opens a sync stream to s from a bare peer, for tests that
// write the protocol by hand; the stream is reset when the test ends or
// after limit.
func rawSyncSession(t *testing.T, mn mocknet.Mocknet, s *Swarm, limit time.Duration) (host.Host, *frameWriter, *frameReader) {
	t.Helper()
	att := connectedPeer(t, mn, s.host.ID())
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	t.Cleanup(cancel)
	st, err := att.NewStream(ctx, s.host.ID(), ProtocolSync)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Reset() })
	_ = st.SetDeadline(time.Now().Add(limit))
	return att, newFrameWriter(st), newFrameReader(st)
}

// TestSync_RepeatedAsksDoNotMultiplySends: a peer that says "I hold
// nothing" for the whole set every turn, after being sent all of it, gets
// the set at most about twice per session, not once per turn (32 times:
// review 3, U5), and a strike. An honest peer never asks for a range twice.
func TestSync_RepeatedAsksDoNotMultiplySends(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	s := mockSwarm(t, mn, 4)
	w, err := store.GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	ts := uint64(time.Now().UnixMilli()) - 60_000
	claims := make([]store.Claim, n)
	for i := range claims {
		claims[i] = w.Text(store.MidhashCID(fmt.Appendf(make([]byte, 0, 32), "%032d", i)), "title", fmt.Sprint(i), ts+uint64(i))
	}
	if _, err := s.cfg.Store.Submit(t.Context(), claims, store.SubmitOptions{Origin: store.OriginLocal}); err != nil {
		t.Fatal(err)
	}
	att, fw, fr := rawSyncSession(t, mn, s, 30*time.Second)
	// "Nothing here" below the end, and a count the node cannot match
	// past it, so the node answers with a range and the session goes on.
	edge := store.SyncItem{TS: math.MaxUint64 - 1}
	nothing := encodeRanges([]rangeEntry{
		{upper: edge, mode: modeFingerprint},
		{upper: store.MaxSyncItem, mode: modeFingerprint, count: 5, fp: wireFP{1}},
	})
	received := 0
	for turn := range maxTurns / 2 {
		if turn == 0 {
			if err := fw.write(appendHello(nil, hello{version: protoVersion})); err != nil {
				break
			}
		}
		for _, f := range nothing {
			if err := fw.write(f); err != nil {
				break
			}
		}
		if err := fw.write([]byte{frameEnd}); err != nil || fw.flush() != nil {
			break
		}
		ended := false
		for !ended {
			f, err := fr.next()
			if err != nil {
				ended = true
				turn = maxTurns
				break
			}
			switch f[0] {
			case frameClaims:
				cs, err := decodeClaims(f[1:], 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				received += len(cs)
			case frameEnd:
				ended = true
			}
		}
		if turn >= maxTurns {
			break
		}
	}
	t.Logf("a peer asking for the whole set of %d claims every turn was sent %d", n, received)
	if received < n {
		t.Fatalf("the set was not sent even once (%d of %d)", received, n)
	}
	if received > 2*n+resendSlack {
		t.Fatalf("a peer asking for the whole set of %d claims every turn was sent %d claims in one session", n, received)
	}
	if !s.Struck(att.ID()) {
		t.Fatal("the peer was not held to account")
	}
}
