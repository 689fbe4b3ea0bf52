package swarm

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/metanode/metanode/store"
)

// TestReconcile_RefusedBurstsConverge: two list-mode homes hold the same
// claims and refused different parts of one burst of an untrusted signer's
// claims (close in time, none of their own in between: a plugin's scan
// relayed by an open-trust node at different times). Neither has an own
// item to cut that range at; the session must still settle it instead of
// bouncing one fingerprint of it until the turn limit.
func TestReconcile_RefusedBurstsConverge(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	common := randItems(r, 1000, 1, 1e9)
	burst := randItems(r, 100, 500_000_000, 100) // 100 claims within 100 ms
	big := randItems(r, 5000, 700_000_000, 1000) // more than one id list holds
	cases := []struct {
		name   string
		ea, eb []store.SyncItem
	}{
		{"one refused 100, the other 40 of them", burst, burst[:40]},
		{"each refused 40 others", burst[:40], burst[60:]},
		{"one refused 5000, the other none", big, nil},
		{"one refused 5000, the other every other one", big, everyOther(big)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := newSimSide(slices.Clone(common), slices.Clone(c.ea), defaultReconcileParams)
			b := newSimSide(slices.Clone(common), slices.Clone(c.eb), defaultReconcileParams)
			res := simulate(t, a, b) // fails past maxTurns
			if res.moved != 0 {
				t.Fatalf("%d items moved between two sides holding the same claims", res.moved)
			}
			t.Logf("refused %d and %d: %d turns, %d bytes of ranges and wants", len(c.ea), len(c.eb), res.turns, res.overhead)
		})
	}
	// A difference of real claims inside the refused burst still moves.
	t.Run("a claim only one side holds inside the refused burst", func(t *testing.T) {
		own := randItems(r, 1, 500_000_050, 1)
		a := newSimSide(append(slices.Clone(common), own...), slices.Clone(burst), defaultReconcileParams)
		b := newSimSide(slices.Clone(common), slices.Clone(burst[:40]), defaultReconcileParams)
		res := simulate(t, a, b)
		if res.moved != 1 || b.set.Len() != len(common)+1 {
			t.Fatalf("moved %d, b holds %d of %d", res.moved, b.set.Len(), len(common)+1)
		}
	})
}

func everyOther(items []store.SyncItem) []store.SyncItem {
	var out []store.SyncItem
	for i := 0; i < len(items); i += 2 {
		out = append(out, items[i])
	}
	return out
}

// FuzzRespondRefused is FuzzRespond with refused items in the view, most
// of them where the set holds none of its own: whatever decodes is
// answered without panic, with ranges that encode and decode again and
// that never repeat a range as one fingerprint of itself when it holds
// more than an id list.
func FuzzRespondRefused(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 3))
	set := store.NewSyncSet()
	set.Load(randItems(r, 300, 1000, 1e6))
	extra := randItems(r, 400, 500_000, 200)
	slices.SortFunc(extra, store.SyncItem.Compare)
	extra = slices.CompactFunc(extra, func(a, b store.SyncItem) bool { return a == b })
	rec := reconciler{view: setView{set: set, extra: extra}, p: defaultReconcileParams, push: true, want: true, sketch: true}
	for _, fr := range encodeRanges(rec.initial().ranges) {
		f.Add(fr)
	}
	var peer reconciler
	peer.view = setView{set: store.NewSyncSet(), extra: extra[:100]}
	peer.p = defaultReconcileParams
	for _, fr := range encodeRanges(peer.initial().ranges) {
		f.Add(fr)
	}
	// A peer's fingerprint of the refused burst alone, where we hold none
	// of our own.
	f.Add(encodeRanges([]rangeEntry{
		{upper: store.SyncItem{TS: 500_000}, mode: modeSkip},
		{upper: store.SyncItem{TS: 500_200}, mode: modeFingerprint, count: 1},
	})[0])
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) == 0 || frame[0] != frameRanges {
			return
		}
		var rd rangeDecoder
		in, err := rd.decode(frame)
		if err != nil {
			return
		}
		plan := rec.respond(in)
		var rd2 rangeDecoder
		var out []rangeEntry
		for _, fr := range encodeRanges(plan.ranges) {
			rs, err := rd2.decode(fr)
			if err != nil {
				t.Fatalf("own answer does not decode: %v", err)
			}
			out = append(out, rs...)
		}
		// A fingerprint answered with one fingerprint of the very same
		// range, when we hold more than an id list there, is the ping-pong.
		lo := store.MinSyncItem
		inFP := map[[2]store.SyncItem]bool{}
		for _, e := range in {
			if e.mode == modeFingerprint {
				inFP[[2]store.SyncItem{lo, e.upper}] = true
			}
			lo = e.upper
		}
		lo = store.MinSyncItem
		for _, e := range out {
			k := [2]store.SyncItem{lo, e.upper}
			if e.mode == modeFingerprint && e.count > uint64(rec.p.idList) && inFP[k] && len(out) < rec.p.maxOut {
				t.Fatalf("range %v answered with a fingerprint of itself (%d items)", k, e.count)
			}
			lo = e.upper
		}
	})
}
