package reconcile

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm/internal/wire"
)

func TestRanges_RoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	items := randItems(r, 200, 1000, 1e6)
	slices.SortFunc(items, store.SyncItem.Compare)
	var entries []Range
	for i := 0; i+3 < len(items); i += 4 {
		e := Range{Upper: items[i+3], Mode: Mode(i/4) % 4}
		switch e.Mode {
		case Sketch:
			e.Count = uint64(i)
			var lo uint64
			if i > 0 {
				lo = items[i-1].TS
			}
			e.syms = buildSketch(items[i:i+3], lo, 1+i%5)
			e.syms[0].count = -int64(i) // negative counts travel too
		case Fingerprint:
			e.Count = uint64(i)
			e.FP[0] = byte(i)
		case IDList:
			for _, it := range items[i : i+3] {
				e.IDs = append(e.IDs, ShortOf(it))
			}
		}
		entries = append(entries, e)
	}
	entries = append(entries, Range{Upper: store.MaxSyncItem, Mode: Fingerprint, Count: 9})
	var got []Range
	var rd RangeDecoder
	for _, f := range EncodeRanges(entries) {
		rs, err := rd.Decode(f)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rs...)
	}
	if len(got) != len(entries) {
		t.Fatalf("%d entries, want %d", len(got), len(entries))
	}
	for i := range got {
		e, g := entries[i], got[i]
		if g.Upper != e.Upper || g.Mode != e.Mode || g.Count != e.Count || g.FP != e.FP || !slices.Equal(g.IDs, e.IDs) || !slices.Equal(g.syms, e.syms) {
			t.Fatalf("entry %d: got %+v, want %+v", i, g, e)
		}
	}
}

func TestRanges_Rejects(t *testing.T) {
	bad := map[string][]byte{
		"count beyond frame":  {wire.Ranges, 100, 1, 0},
		"repeated bound":      {wire.Ranges, 2, 5, 0, 0, 1, 0, 0},
		"after the end":       {wire.Ranges, 2, 0, 0, 5, 0, 0},
		"unknown mode":        {wire.Ranges, 1, 5, 0, 9},
		"prefix too long":     {wire.Ranges, 1, 5, 33},
		"truncated fp":        {wire.Ranges, 1, 5, 0, 1, 0, 1, 2},
		"trailing":            {wire.Ranges, 1, 5, 0, 0, 7},
		"non-canonical":       {wire.Ranges, 1, 0x85, 0x00, 0, 0},
		"unsorted id list":    append([]byte{wire.Ranges, 1, 0, 2, 2, 5, 1, 1, 1, 1, 1, 1, 1, 1, 0}, make([]byte, 8)...),
		"zero-width id delta": {wire.Ranges, 1, 0, 2, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"empty sketch":        {wire.Ranges, 1, 0, 3, 5, 0},
		"sketch over the cap": append([]byte{wire.Ranges, 1, 0, 3, 5, 0x81, 0x20}, make([]byte, (maxSketchSyms+1)*symBytes)...),
		"truncated sketch":    append([]byte{wire.Ranges, 1, 0, 3, 5, 2}, make([]byte, 2*symBytes-1)...),
	}
	for name, f := range bad {
		var rd RangeDecoder
		if _, err := rd.Decode(f); !errors.Is(err, wire.ErrProtocol) {
			t.Errorf("%s: %v, want a protocol violation", name, err)
		}
	}
}

func TestShortID_Span(t *testing.T) {
	it := store.SyncItem{TS: 7}
	for i := range it.ID {
		it.ID[i] = 0xff
	}
	lo, hi := ShortOf(it).Span()
	if lo.Compare(it) > 0 || hi.Compare(it) <= 0 || hi != (store.SyncItem{TS: 8}) {
		t.Fatalf("span %v..%v does not hold %v", lo, hi, it)
	}
	it.ID[3] = 0
	lo, hi = ShortOf(it).Span()
	if lo.Compare(it) > 0 || hi.Compare(it) <= 0 {
		t.Fatalf("span %v..%v does not hold %v", lo, hi, it)
	}
	if s := it.Next(); s.Compare(it) <= 0 {
		t.Fatal("successor not greater")
	}
}

// TestRanges_FrameAllocationBounded: one RANGES frame of a peer (at
// most wire.MaxFrame bytes of 3-byte Skip entries, each ~110 bytes decoded)
// must not make the node allocate far more than the frame when its count
// is past what the turn still allows: the count is checked before the
// decoded slice is allocated.
func TestRanges_FrameAllocationBounded(t *testing.T) {
	cases := []struct {
		name string
		n    int // the frame's count
		done int // ranges the turn decoded already
	}{
		{"count overstated", wire.MaxFrame - 1 - 3, 0},
		{"count exact, past the turn's limit", (wire.MaxFrame - 1 - 3) / 3, 0},
		{"count within one frame, past what the turn has left", 1000, MaxRangesInTurn - 999},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := []byte{wire.Ranges}
			body = binary.AppendUvarint(body, uint64(c.n))
			for k := 0; k < c.n && len(body)+3 <= wire.MaxFrame; k++ {
				body = append(body, 2, 0, byte(Skip)) // bound +1 ms, empty id, Skip
			}
			rd := RangeDecoder{n: c.done}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			rs, err := rd.Decode(body)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			if err == nil {
				t.Fatalf("a frame of %d ranges decoded (%d) with %d of the turn's %d used", c.n, len(rs), c.done, MaxRangesInTurn)
			}
			if alloc > 4*uint64(len(body)) {
				t.Fatalf("refusing a %d-byte RANGES frame (%v) allocated %.1f MB", len(body), err, float64(alloc)/1e6)
			}
		})
	}
}

// TestRanges_LoneEndSkip: a RANGES frame whose only range is the end of
// the set with Skip (2 bytes, the least the grammar allows) decodes; it was
// once refused as a protocol violation, a strike against an honest peer.
func TestRanges_LoneEndSkip(t *testing.T) {
	rd := RangeDecoder{}
	rs, err := rd.Decode([]byte{wire.Ranges, 1, 0, byte(Skip)})
	if err != nil || len(rs) != 1 || rs[0].Mode != Skip || !rd.ended {
		t.Fatalf("decoded %+v (ended %v), %v; want one Skip to the end of the set", rs, rd.ended, err)
	}
}
