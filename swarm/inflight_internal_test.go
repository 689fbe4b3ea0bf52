package swarm

import (
	"slices"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/metanode/metanode/store"
)

func itemAt(ts uint64) store.SyncItem { return store.SyncItem{TS: ts} }

// emptyFP is "I hold nothing in [lo, hi)" as the reconciler writes it.
func emptyFP(hi store.SyncItem) rangeEntry {
	var acc store.Accumulator
	return rangeEntry{upper: hi, mode: modeFingerprint, fp: wireFingerprint(acc.Fingerprint())}
}

// wire encodes a plan's ranges and decodes them as the peer would: what
// the registry leaves must still be a valid turn.
func wire(t *testing.T, rs []rangeEntry) []rangeEntry {
	t.Helper()
	var rd rangeDecoder
	var out []rangeEntry
	for _, f := range encodeRanges(rs) {
		got, err := rd.decode(f)
		if err != nil {
			t.Fatalf("the turn does not decode: %v", err)
		}
		out = append(out, got...)
	}
	return out
}

type shape struct {
	upper uint64 // ts; 0 = end of set
	mode  byte
}

func shapeOf(rs []rangeEntry) []shape {
	var out []shape
	for _, e := range rs {
		s := shape{upper: e.upper.TS, mode: e.mode}
		if e.upper == store.MaxSyncItem {
			s.upper = 0
		}
		if e.mode == modeFingerprint && e.count != 0 {
			s.mode = 9 // a fingerprint of our items: never cut
		}
		out = append(out, s)
	}
	return out
}

func TestInflight_SecondSessionLeavesTheRangeToTheFirst(t *testing.T) {
	r := newInflight()
	a, b := r.begin("a", true), r.begin("b", true)
	cold := func() turnPlan { return turnPlan{ranges: []rangeEntry{emptyFP(store.MaxSyncItem)}} }
	pa, pb := cold(), cold()
	r.claim(a, &pa)
	r.claim(b, &pb)
	if len(pa.ranges) != 1 || a.skipped != 0 {
		t.Fatalf("the first session was cut: %+v", pa.ranges)
	}
	if !pb.final() || b.skipped == 0 || !b.holders[a] {
		t.Fatalf("the second session still asks: ranges %+v, skipped %d", pb.ranges, b.skipped)
	}
	// b ends first: its peer waits for a; a's end makes it ready, once.
	if n := r.end(b); n == 0 {
		t.Fatal("end reports nothing deferred")
	}
	if got := r.takeReady(); len(got) != 0 {
		t.Fatalf("ready before the holder ended: %v", got)
	}
	r.end(a)
	select {
	case <-r.wake:
	default:
		t.Fatal("no wake when the holder ended")
	}
	if got := r.takeReady(); !slices.Equal(got, []peer.ID{"b"}) {
		t.Fatalf("ready = %v, want [b]", got)
	}
	if len(r.spans) != 0 || len(r.waiting) != 0 {
		t.Fatalf("left behind: %d spans, %d waiting", len(r.spans), len(r.waiting))
	}
	// The retry asks: nothing is in flight any more.
	c := r.begin("b", true)
	pc := cold()
	r.claim(c, &pc)
	if len(pc.ranges) != 1 || c.skipped != 0 {
		t.Fatalf("the retry was cut: %+v", pc.ranges)
	}
}

func TestInflight_EmptyRangeIsCutAroundOthersSpans(t *testing.T) {
	r := newInflight()
	a, b := r.begin("a", true), r.begin("b", true)
	// a asks for [10, 20) (skip up to 10, empty to 20) and one want at 30.
	pa := turnPlan{
		ranges: []rangeEntry{{upper: itemAt(10), mode: modeSkip}, emptyFP(itemAt(20))},
		wants:  []shortID{{ts: 30}},
	}
	r.claim(a, &pa)
	pb := turnPlan{ranges: []rangeEntry{emptyFP(store.MaxSyncItem)}}
	r.claim(b, &pb)
	got := shapeOf(wire(t, pb.ranges))
	want := []shape{
		{10, modeFingerprint}, {20, modeSkip}, // a's range
		{30, modeFingerprint}, {30, modeSkip}, // up to a's want, which is skipped
		{0, modeFingerprint},
	}
	if len(got) != len(want) {
		t.Fatalf("ranges %v, want %v", got, want)
	}
	for i := range got {
		if got[i].mode != want[i].mode || got[i].upper != want[i].upper {
			t.Fatalf("ranges %v, want %v", got, want)
		}
	}
	for _, e := range pb.ranges {
		if e.mode == modeFingerprint && e.count != 0 {
			t.Fatalf("a piece claims items: %+v", e)
		}
	}
	// b registered the pieces it asks for: a third session gets nothing.
	c := r.begin("c", true)
	pc := turnPlan{ranges: []rangeEntry{emptyFP(store.MaxSyncItem)}, wants: []shortID{{ts: 5}, {ts: 15}, {ts: 30}}}
	r.claim(c, &pc)
	if !pc.final() || !c.holders[a] || !c.holders[b] {
		t.Fatalf("a third session asks for %+v / %+v, holders %v", pc.ranges, pc.wants, c.holders)
	}
}

func TestInflight_ListsAndWantsOverOthersSpansAreLeft(t *testing.T) {
	r := newInflight()
	a, b := r.begin("a", true), r.begin("b", true)
	pa := turnPlan{wants: []shortID{{ts: 15}}}
	r.claim(a, &pa)
	idl := func(lo, hi uint64) rangeEntry {
		return rangeEntry{upper: itemAt(hi), mode: modeIDList, ids: []shortID{{ts: lo}}}
	}
	pb := turnPlan{
		ranges: []rangeEntry{{upper: itemAt(10), mode: modeSkip}, idl(10, 20), idl(20, 30),
			{upper: itemAt(40), mode: modeFingerprint, count: 7}},
		wants: []shortID{{ts: 14}, {ts: 15}, {ts: 16}},
	}
	r.claim(b, &pb)
	if got := shapeOf(wire(t, pb.ranges)); !slices.Equal(got, []shape{{20, modeSkip}, {30, modeIDList}, {40, 9}}) {
		t.Fatalf("ranges %v: the list over a's want must be skipped, the rest kept", got)
	}
	if !slices.Equal(pb.wants, []shortID{{ts: 14}, {ts: 16}}) {
		t.Fatalf("wants %v: a's must be dropped", pb.wants)
	}
	// A session that may not defer (SyncWith, or out of rounds) asks for
	// everything and registers only what nobody holds.
	c := r.begin("c", false)
	pc := turnPlan{ranges: []rangeEntry{emptyFP(store.MaxSyncItem)}, wants: []shortID{{ts: 14}, {ts: 50}}}
	r.claim(c, &pc)
	if len(pc.ranges) != 1 || len(pc.wants) != 2 || c.skipped != 0 {
		t.Fatalf("a session that may not defer was cut: %+v %v", pc.ranges, pc.wants)
	}
	for i := 1; i < len(r.spans); i++ {
		if r.spans[i-1].hi.Compare(r.spans[i].lo) > 0 {
			t.Fatalf("spans overlap: %+v", r.spans)
		}
	}
	r.end(c)
	for _, s := range r.spans {
		if s.f == c {
			t.Fatal("an ended session's span is left")
		}
	}
}

// A peer whose sessions keep waiting for others asks regardless after
// maxDeferRounds waits; a session that left nothing resets the count.
func TestInflight_WaitsAreBounded(t *testing.T) {
	r := newInflight()
	for round := range maxDeferRounds + 1 {
		h := r.begin("holder", true)
		ph := turnPlan{ranges: []rangeEntry{emptyFP(store.MaxSyncItem)}}
		r.claim(h, &ph)
		w := r.begin("w", true)
		pw := turnPlan{ranges: []rangeEntry{emptyFP(store.MaxSyncItem)}}
		r.claim(w, &pw)
		if deferred := pw.final(); deferred != (round < maxDeferRounds) {
			t.Fatalf("round %d: deferred %v", round, deferred)
		}
		r.end(w)
		r.end(h)
		r.takeReady()
	}
	if r.defers["w"] != 0 {
		t.Fatalf("a session that asked for everything left the count at %d", r.defers["w"])
	}
}
