package reconcile

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/metanode/metanode/store"
)

// TestSketch_Vectors pins the element hash and the index walk: another
// implementation must reproduce them (protocols.md), and a change here
// would make this node's sketches unreadable to its peers.
func TestSketch_Vectors(t *testing.T) {
	e := sketchElem{off: 1234, pre: [ShortIDBytes]byte{1, 2, 3, 4, 5, 6}}
	if h := e.hash(); h != 0x084878d4f160c5d7 {
		t.Errorf("hash %#x", h)
	}
	w := indexWalk{state: e.hash()}
	var idx []uint64
	for i := uint64(0); i < 1000; i = w.next() {
		idx = append(idx, i)
	}
	want := []uint64{0, 3, 4, 5, 7, 8, 16, 18, 20, 47, 56, 64, 92, 109, 169, 234, 429, 546} // also computed by a separate Python script
	if !slices.Equal(idx, want) {
		t.Errorf("indexes %v, want %v", idx, want)
	}
}

// TestSketch_DecodeRate: a sketch of sketchSizeFor(d) symbols decodes a
// difference of d items (both sides holding some) nearly always, and each
// decoded item is named on the right side.
func TestSketch_DecodeRate(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 2))
	for _, d := range []int{1, 2, 5, 30, 156, 1000} {
		trials := max(20, 3000/d)
		ok := 0
		for range trials {
			items := randItems(r, d, 5000, 1e6)
			common := randItems(r, 50, 5000, 1e6)
			theirs := append(slices.Clone(common), items[:d/2]...)
			ours := append(slices.Clone(common), items[d/2:]...)
			n := initialSketchSize(d)
			diff := buildSketch(theirs, 4000, n)
			subtractSketch(diff, buildSketch(ours, 4000, n))
			th, ou, good := peel(diff)
			if !good {
				continue
			}
			ok++
			if len(th) != d/2 || len(ou) != d-d/2 {
				t.Fatalf("d=%d: decoded %d theirs and %d ours", d, len(th), len(ou))
			}
			for _, x := range th {
				if !slices.ContainsFunc(items[:d/2], func(it store.SyncItem) bool { return elemOf(it, 4000) == x }) {
					t.Fatalf("d=%d: decoded %+v, not one of theirs", d, x)
				}
			}
		}
		if rate := float64(ok) / float64(trials); rate < 0.9 {
			t.Errorf("d=%d: %d symbols decode %.2f of the time, want ≥ 0.9", d, initialSketchSize(d), rate)
		}
	}
}

// TestSketch_NextSize: a sketch that did not decode is answered with one
// big enough for the difference (estimated from what is left), at least
// twice the size.
func TestSketch_NextSize(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 1))
	for _, d := range []int{40, 400, 2000} {
		var sizes []int
		for range 9 {
			items := randItems(r, d, 0, 1e9)
			diff := buildSketch(items[:d/2], 0, 24)
			subtractSketch(diff, buildSketch(items[d/2:], 0, 24))
			th, ou, ok := peel(diff)
			if ok {
				t.Fatalf("d=%d decoded from 24 symbols", d)
			}
			sizes = append(sizes, nextSketchSize(diff, len(th)+len(ou)))
		}
		slices.Sort(sizes)
		med := sizes[len(sizes)/2]
		if want := min(sketchSizeFor(float64(d)), maxSketchSyms+1); med < want/2 || med > 2*want {
			t.Errorf("d=%d: median next size %d (%v), want about %d", d, med, sizes, want)
		}
		if sizes[0] < 48 {
			t.Errorf("d=%d: next size %d, want at least twice 24", d, sizes[0])
		}
	}
}

// TestSketch_PeelGarbage: a forged sketch ends peeling within its budget.
func TestSketch_PeelGarbage(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for range 200 {
		d := make([]codedSym, 1+r.IntN(300))
		for i := range d {
			d[i] = codedSym{sum: sketchElem{off: r.Uint64N(4)}, chk: r.Uint64N(3), count: int64(r.IntN(3)) - 1}
			if r.IntN(3) == 0 { // a valid-looking pure symbol
				d[i].chk = d[i].sum.hash()
			}
		}
		th, ou, _ := peel(d)
		if len(th)+len(ou) > len(d)+16 {
			t.Fatalf("peeled %d items from %d symbols", len(th)+len(ou), len(d))
		}
	}
}

// TestSketch_Budget: a peer that keeps sending sketches gets fingerprints
// once the session's coding budget is spent, and nothing breaks.
func TestSketch_Budget(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 8))
	ours := randItems(r, 5000, 1000, 1e6)
	set := store.NewSyncSet()
	set.Load(ours)
	rec := New(set, nil, DefaultParams)
	// Nearly our set: too different for 8 symbols, close enough that the
	// honest answer is a bigger sketch.
	forged := append(slices.Clone(ours[:4990]), randItems(r, 10, 1000, 1e6)...)
	all := store.SyncItem{}
	sketches, turns := 0, 0
	for turns = 0; turns < 1000 && rec.coded <= sketchBudget<<16; turns++ {
		in := []Range{{Upper: store.MaxSyncItem, Mode: Sketch, syms: buildSketch(forged, all.TS, 8)}}
		in[0].Count = 5000
		plan := rec.Respond(in)
		if len(plan.Ranges) == 0 {
			t.Fatalf("turn %d: no answer to an undecodable sketch", turns)
		}
		if plan.Ranges[0].Mode != Sketch {
			break
		}
		sketches++
	}
	if sketches == 0 || turns >= 1000 {
		t.Fatalf("%d sketch answers in %d turns: want some, then fingerprints", sketches, turns)
	}
	if limit := sketchBudget * (1 << 16); rec.coded > limit {
		t.Fatalf("coded %d items, budget %d", rec.coded, limit)
	}
	t.Logf("%d sketch answers, then fingerprints (%d items coded)", sketches, rec.coded)
}

// TestSketch_ForgedSketchesBuyLittle: a peer sending many tiny sketches
// with forged counts (each claiming a big difference and a huge range)
// gets answers at most 16 times as big (sketchGrowth), and one turn's
// answer stays under 2^18 symbols (maxTurnSketchSyms).
func TestSketch_ForgedSketchesBuyLittle(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	items := randItems(r, 20000, 1000, 1e9)
	slices.SortFunc(items, store.SyncItem.Compare)
	set := store.NewSyncSet()
	set.Load(items)
	for _, k := range []int{1, 3} { // symbols per forged sketch
		rec := New(set, nil, DefaultParams)
		var in []Range
		for i := 0; i+1 < len(items); i += 2 { // one of our items in each range
			syms := make([]codedSym, k)
			syms[0] = codedSym{count: 2401, chk: 1}
			in = append(in, Range{Upper: items[i+1], Mode: Sketch, Count: 1<<31 - 1, syms: syms})
		}
		plan := rec.Respond(in)
		total := 0
		for _, e := range plan.Ranges {
			if e.Mode == Sketch {
				if len(e.syms) > 16*k {
					t.Fatalf("a %d-symbol sketch answered with %d symbols", k, len(e.syms))
				}
				total += len(e.syms)
			}
		}
		if total > 1<<18 {
			t.Fatalf("%d symbols in one turn", total)
		}
		t.Logf("%d forged %d-symbol sketches: %d ranges, %d symbols in the answer", len(in), k, len(plan.Ranges), total)
	}
}
