package swarm

import (
	"slices"
	"strings"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// TestPackGossip: calls are kept whole in a message wherever they fit, no
// message passes the limits, every claim leaves once, in order; a call too
// big for one message is split with its vouches leading every part.
func TestPackGossip(t *testing.T) {
	home, w := storetest.Signer(880), storetest.Signer(881)
	cid, err := store.PeerIDCID(home.UID())
	if err != nil {
		t.Fatal(err)
	}
	v := home.Text(cid, store.VouchPrefix+w.UID(), "true", 1000)
	claim := func(i int, size int) store.Claim {
		return w.Text(storetest.CID(i), "title", strings.Repeat("x", size), 1000)
	}
	check := func(name string, calls [][]store.Claim, msgs [][]store.Claim) {
		t.Helper()
		var got []store.Claim // a vouch repeated in the parts of a split call counts once
		seen := map[store.ID]bool{}
		for _, m := range msgs {
			if len(m) == 0 || len(m) > maxGossipClaims || wireSize(m) > maxGossipBytes-16 {
				t.Errorf("%s: a message of %d claims, %d bytes", name, len(m), wireSize(m))
			}
			for _, c := range m {
				if !seen[c.ID()] {
					seen[c.ID()] = true
					got = append(got, c)
				}
			}
		}
		var all []store.Claim
		for _, c := range calls {
			all = append(all, c...)
		}
		if !slices.EqualFunc(got, all, func(a, b store.Claim) bool { return a.ID() == b.ID() }) {
			t.Errorf("%s: %d claims out, want the %d in, once each and in order", name, len(got), len(all))
		}
	}

	// Small calls share messages; one that would straddle starts a new one.
	var calls [][]store.Claim
	for i := range 7 {
		var call []store.Claim
		for j := range 300 {
			call = append(call, claim(i*1000+j, 10))
		}
		calls = append(calls, call)
	}
	msgs := packGossip(calls)
	check("small calls", calls, msgs)
	if len(msgs) != 3 { // 3 calls (900) fit in 1024, a fourth does not
		t.Errorf("7 calls of 300: %d messages, want 3", len(msgs))
	}
	for _, m := range msgs {
		if len(m)%300 != 0 {
			t.Errorf("a call was split although it fits: message of %d", len(m))
		}
	}

	// A vouch and 2,500 claims of the writer it vouches for: three parts,
	// each led by the vouch.
	big := []store.Claim{v}
	for i := range 2500 {
		big = append(big, claim(10_000+i, 10))
	}
	msgs = packGossip([][]store.Claim{{claim(1, 10)}, big})
	if len(msgs) != 4 {
		t.Fatalf("a claim and a call of 2,501: %d messages, want 4", len(msgs))
	}
	for i, m := range msgs[1:] {
		if m[0].ID() != v.ID() || slices.IndexFunc(m[1:], func(c store.Claim) bool { return c.ID() == v.ID() }) >= 0 {
			t.Errorf("part %d of the split call does not start with the vouch (once)", i)
		}
	}
	check("a split call", [][]store.Claim{{claim(1, 10)}, big}, msgs)

	// Bytes bound a message too: 40 claims of ~16 KB.
	var fat []store.Claim
	for i := range 40 {
		fat = append(fat, claim(20_000+i, 16_000))
	}
	msgs = packGossip([][]store.Claim{fat})
	check("large values", [][]store.Claim{fat}, msgs)
	if len(msgs) < 2 {
		t.Errorf("640 KB of claims in %d message", len(msgs))
	}
}
