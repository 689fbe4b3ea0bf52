package swarm_test

import (
	"context"
	"encoding/binary"
	"io"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

// TestFetch_AnswerBoundToAskedCIDs: a fetch answer is bound to its
// request. A peer answering a FETCH of one cid with claims about other
// cids gets none of them stored, except those joined to the asked cid by
// a validly signed link claim in the same answer (its group). A forged
// link joins nothing. (Review 3, D1: an interest-mode node kept whatever a
// peer answered its interest fetch with.)
func TestFetch_AnswerBoundToAskedCIDs(t *testing.T) {
	mn := newMocknet(t)
	victim := newNode(t, nodeOpt{mn: mn, swarm: noAutoSync})
	attacker := attackerOf(t, mn, victim)
	w := mustSigner(t)
	ts := uint64(time.Now().UnixMilli()) - 60_000
	asked, linked, viaForged := testCID(1), testCID(2), testCID(3)
	forged := w.Text(asked, store.LinkPrefix+viaForged, "true", ts+2)
	forged.Sig[9] ^= 1
	answer := []store.Claim{
		w.Text(asked, "title", "asked", ts),
		w.Text(asked, store.LinkPrefix+linked, "true", ts+1),
		w.Text(linked, "title", "linked to the asked cid", ts+3),
		forged,
		w.Text(viaForged, "title", "joined only by a forged link", ts+4),
	}
	var unasked []string
	for i := range 20 {
		c := testCID(100 + i)
		unasked = append(unasked, c)
		answer = append(answer, w.Text(c, "title", "never asked", ts+10+uint64(i)))
	}
	body := binary.AppendUvarint([]byte{2}, uint64(len(answer))) // CLAIMS
	for i := range answer {
		body = answer[i].AppendWire(body)
	}
	attacker.SetStreamHandler(swarm.ProtocolFetch, func(st network.Stream) {
		defer st.Close()
		_, _ = io.Copy(io.Discard, io.LimitReader(st, 1<<16)) // the request
		_, _ = st.Write(append(frame(body...), frame(5)...))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := victim.sw.FetchFrom(ctx, attacker.ID(), []string{asked})
	if err != nil {
		t.Fatal(err)
	}
	has := func(c string) bool {
		ok, err := victim.st.HasCID(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for _, c := range []string{asked, linked} {
		if !has(c) {
			t.Errorf("the claims of %s (asked, or linked to it) were not stored", c)
		}
	}
	if has(viaForged) {
		t.Error("a forged link claim joined a cid to the asked one")
	}
	kept := 0
	for _, c := range unasked {
		if has(c) {
			kept++
		}
	}
	t.Logf("FETCH of 1 cid answered with %d claims: %d stored", len(answer), n)
	if kept > 0 {
		t.Fatalf("the node stored claims about %d of %d cids it never asked for", kept, len(unasked))
	}
}

// noAutoSync keeps a node from starting sessions by itself, so only the
// test's own requests run.
func noAutoSync(c *swarm.Config) { c.NoAutoSync = true }
