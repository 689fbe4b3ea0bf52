package reconcile_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm/reconcile"
)

func TestReconcile_Converges(t *testing.T) {
	t.Parallel()
	const t0, span = 1_700_000_000_000, 30 * 24 * 3600 * 1000
	cases := []struct {
		name                   string
		common, onlyA, onlyB   int
		sameTS                 bool // every item has one timestamp
		wantMaxTurns, wantMove int
	}{
		{name: "Identical", common: 5000, wantMaxTurns: 2},
		{name: "BothEmpty", wantMaxTurns: 2},
		{name: "InitiatorEmpty", onlyB: 3000, wantMaxTurns: 2},
		{name: "ResponderEmpty", onlyA: 3000, wantMaxTurns: 3},
		{name: "OneMissingHere", common: 20000, onlyB: 1, wantMaxTurns: 6},
		{name: "OneMissingThere", common: 20000, onlyA: 1, wantMaxTurns: 7},
		{name: "ScatteredBothWays", common: 20000, onlyA: 300, onlyB: 200, wantMaxTurns: 8},
		{name: "HeavyBothWays", common: 3000, onlyA: 1500, onlyB: 1500, wantMaxTurns: 10},
		{name: "SmallSets", common: 5, onlyA: 3, onlyB: 4, wantMaxTurns: 4},
		{name: "SameTimestamp", common: 5000, onlyA: 50, onlyB: 70, sameTS: true, wantMaxTurns: 8},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(i), 7))
			sp := uint64(span)
			if tc.sameTS {
				sp = 1
			}
			common := reconcile.RandItems(r, tc.common, t0, sp)
			onlyA := reconcile.RandItems(r, tc.onlyA, t0, sp)
			onlyB := reconcile.RandItems(r, tc.onlyB, t0, sp)
			a := newSimSide(append(slices.Clone(common), onlyA...), nil, reconcile.DefaultParams)
			b := newSimSide(append(slices.Clone(common), onlyB...), nil, reconcile.DefaultParams)
			res := simulate(t, a, b)
			sameSets(t, a.set, b.set)
			if want := tc.onlyA + tc.onlyB; res.moved != want {
				t.Errorf("moved %d items, want exactly the %d that differ", res.moved, want)
			}
			if res.turns > tc.wantMaxTurns {
				t.Errorf("%d turns, want at most %d", res.turns, tc.wantMaxTurns)
			}
			t.Logf("turns %d, overhead %d B, moved %d", res.turns, res.overhead, res.moved)
		})
	}
}

// TestReconcile_RefusedCountAsHeld: items this side refused (untrusted) are
// neither requested again nor pushed, and do not keep ranges apart.
func TestReconcile_RefusedCountAsHeld(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	common := reconcile.RandItems(r, 10000, 1, 1e9)
	untrusted := reconcile.RandItems(r, 40, 1, 1e9)
	a := newSimSide(common, slices.Clone(untrusted), reconcile.DefaultParams) // refused them earlier
	b := newSimSide(append(slices.Clone(common), untrusted...), nil, reconcile.DefaultParams)
	res := simulate(t, a, b)
	if res.moved != 0 || res.turns != 2 {
		t.Fatalf("moved %d in %d turns, want nothing in one round trip", res.moved, res.turns)
	}
	// The other direction, b initiating, is settled as fast.
	res = simulate(t, b, a)
	if res.moved != 0 || res.turns != 2 {
		t.Fatalf("reverse: moved %d in %d turns", res.moved, res.turns)
	}
}

// TestReconcile_PeerWithoutSketches: a peer that did not announce sketch
// support (an older node) gets none, and the session still converges.
func TestReconcile_PeerWithoutSketches(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(12, 1))
	common := reconcile.RandItems(r, 20000, 1, 1e9)
	onlyA, onlyB := reconcile.RandItems(r, 200, 1, 1e9), reconcile.RandItems(r, 200, 1, 1e9)
	for _, sketch := range []bool{false, true} {
		a := newSimSide(append(slices.Clone(common), onlyA...), nil, reconcile.DefaultParams)
		b := newSimSide(append(slices.Clone(common), onlyB...), nil, reconcile.DefaultParams)
		a.rec.Sketch, b.rec.Sketch = sketch, sketch
		res := simulate(t, a, b)
		sameSets(t, a.set, b.set)
		if res.moved != 400 {
			t.Fatalf("sketches %v: moved %d, want 400", sketch, res.moved)
		}
		if (res.sketches > 0) != sketch {
			t.Fatalf("sketches %v: %d sketch entries sent", sketch, res.sketches)
		}
		t.Logf("sketches %v: %d turns, %d B", sketch, res.turns, res.overhead)
	}
}

// TestReconcile_OneWay: a side that accepts no claims (interest mode) only
// pushes; the other never streams to it.
func TestReconcile_OneWay(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	common := reconcile.RandItems(r, 5000, 1, 1e9)
	onlyA := reconcile.RandItems(r, 30, 1, 1e9)
	onlyB := reconcile.RandItems(r, 40, 1, 1e9)
	a := newSimSide(append(slices.Clone(common), onlyA...), nil, reconcile.DefaultParams)
	b := newSimSide(append(slices.Clone(common), onlyB...), nil, reconcile.DefaultParams)
	a.rec.Want = false // a is the interest node
	b.rec.Push = false // b read a's HELLO
	res := simulate(t, a, b)
	if res.moved != len(onlyA) {
		t.Fatalf("moved %d, want the %d a pushes", res.moved, len(onlyA))
	}
	if got := a.set.Len(); got != len(common)+len(onlyA) {
		t.Fatalf("the interest side received claims: %d items", got)
	}
}

// TestReconcile_Deferral: a turn over the output budget defers the rest
// with one fingerprint and the session still converges.
func TestReconcile_Deferral(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(8, 9))
	p := reconcile.DefaultParams
	p.MaxOut = 40
	common := reconcile.RandItems(r, 5000, 1, 1e9)
	a := newSimSide(append(slices.Clone(common), reconcile.RandItems(r, 100, 1, 1e9)...), nil, p)
	b := newSimSide(append(slices.Clone(common), reconcile.RandItems(r, 100, 1, 1e9)...), nil, p)
	res := simulate(t, a, b)
	sameSets(t, a.set, b.set)
	if res.moved != 200 {
		t.Fatalf("moved %d, want 200", res.moved)
	}
	t.Logf("%d turns", res.turns)
}

// TestReconcile_ScatteredCheap: differences scattered over a large set,
// each alone in its neighbourhood, cost at most 100 bytes of overhead each
// (range sketches; fingerprints alone cost over 200). The Million test
// below measures the reference case without -race.
func TestReconcile_ScatteredCheap(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(14, 15))
	const t0, span = 1_700_000_000_000, 90 * 24 * 3600 * 1000
	common := reconcile.RandItems(r, 100_000, t0, span)
	extra := reconcile.RandItems(r, 1000, t0, span)
	a := newSimSide(append(slices.Clone(common), extra[:500]...), nil, reconcile.DefaultParams)
	b := newSimSide(append(slices.Clone(common), extra[500:]...), nil, reconcile.DefaultParams)
	res := simulate(t, a, b)
	sameSets(t, a.set, b.set)
	per := float64(res.overhead) / float64(len(extra))
	t.Logf("%d turns, %.1f B per difference", res.turns, per)
	if res.moved != len(extra) || per > 100 {
		t.Fatalf("moved %d of %d, %.1f B per difference (want ≤ 100)", res.moved, len(extra), per)
	}
}

// TestReconcile_Million measures the negentropy reference case: 1M items
// on both sides, 1 difference, then 10,000.
func TestReconcile_Million(t *testing.T) {
	t.Parallel()
	if testing.Short() || reconcile.RaceEnabled {
		t.Skip("1M-item sets: a measurement, run without -short and -race")
	}
	r := rand.New(rand.NewPCG(10, 11))
	const t0, span = 1_700_000_000_000, 90 * 24 * 3600 * 1000
	common := reconcile.RandItems(r, 1_000_000, t0, span)
	for _, tc := range []struct {
		name             string
		diffs            int
		recent           bool // the differences are the newest claims (a node was offline)
		maxTurns, maxOvh int
	}{
		{"OneDiff", 1, false, 6, 4096},
		{"10kScattered", 10000, false, 12, 100 * 10000},
		{"10kRecent", 10000, true, 10, 100 * 10000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t1 := uint64(t0)
			if tc.recent {
				t1 = t0 + span
			}
			extra := reconcile.RandItems(r, tc.diffs, t1, span)
			half := tc.diffs / 2
			a := newSimSide(append(slices.Clone(common), extra[:half]...), nil, reconcile.DefaultParams)
			b := newSimSide(append(slices.Clone(common), extra[half:]...), nil, reconcile.DefaultParams)
			res := simulate(t, a, b)
			sameSets(t, a.set, b.set)
			t.Logf("%s: %d turns (%d round trips), %d B overhead, %.1f B per difference", tc.name,
				res.turns, (res.turns+1)/2, res.overhead, float64(res.overhead)/float64(tc.diffs))
			if res.turns > tc.maxTurns {
				t.Errorf("%d turns, want at most %d", res.turns, tc.maxTurns)
			}
			if tc.maxOvh > 0 && res.overhead > tc.maxOvh {
				t.Errorf("overhead %d B, want at most %d", res.overhead, tc.maxOvh)
			}
		})
	}
}

// TestReconcile_RefusedBurstsConverge: two list-mode homes hold the same
// claims and refused different parts of one burst of an untrusted signer's
// claims (close in time, none of their own in between: a plugin's scan
// relayed by an open-trust node at different times). Neither has an own
// item to cut that range at; the session must still settle it instead of
// bouncing one fingerprint of it until the turn limit.
func TestReconcile_RefusedBurstsConverge(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 7))
	common := reconcile.RandItems(r, 1000, 1, 1e9)
	burst := reconcile.RandItems(r, 100, 500_000_000, 100) // 100 claims within 100 ms
	big := reconcile.RandItems(r, 5000, 700_000_000, 1000) // more than one id list holds
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
			a := newSimSide(slices.Clone(common), slices.Clone(c.ea), reconcile.DefaultParams)
			b := newSimSide(slices.Clone(common), slices.Clone(c.eb), reconcile.DefaultParams)
			res := simulate(t, a, b) // fails past maxTurns
			if res.moved != 0 {
				t.Fatalf("%d items moved between two sides holding the same claims", res.moved)
			}
			t.Logf("refused %d and %d: %d turns, %d bytes of ranges and wants", len(c.ea), len(c.eb), res.turns, res.overhead)
		})
	}
	// A difference of real claims inside the refused burst still moves.
	t.Run("a claim only one side holds inside the refused burst", func(t *testing.T) {
		own := reconcile.RandItems(r, 1, 500_000_050, 1)
		a := newSimSide(append(slices.Clone(common), own...), slices.Clone(burst), reconcile.DefaultParams)
		b := newSimSide(slices.Clone(common), slices.Clone(burst[:40]), reconcile.DefaultParams)
		res := simulate(t, a, b)
		if res.moved != 1 || b.set.Len() != len(common)+1 {
			t.Fatalf("moved %d, b holds %d of %d", res.moved, b.set.Len(), len(common)+1)
		}
	})
}
