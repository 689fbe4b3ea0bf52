package swarm

import (
	"encoding/binary"
	"runtime"
	"testing"
)

// TestSync_RangesFrameAllocationBounded: one RANGES frame of a peer (at
// most maxFrame bytes of 3-byte Skip entries, each ~110 bytes decoded)
// must not make the node allocate far more than the frame when its count
// is past what the turn still allows: the count is checked before the
// decoded slice is allocated.
func TestSync_RangesFrameAllocationBounded(t *testing.T) {
	cases := []struct {
		name string
		n    int // the frame's count
		done int // ranges the turn decoded already
	}{
		{"count overstated", maxFrame - 1 - 3, 0},
		{"count exact, past the turn's limit", (maxFrame - 1 - 3) / 3, 0},
		{"count within one frame, past what the turn has left", 1000, maxRangesInTurn - 999},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := []byte{frameRanges}
			body = binary.AppendUvarint(body, uint64(c.n))
			for k := 0; k < c.n && len(body)+3 <= maxFrame; k++ {
				body = append(body, 2, 0, modeSkip) // bound +1 ms, empty id, Skip
			}
			rd := rangeDecoder{n: c.done}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			rs, err := rd.decode(body)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			if err == nil {
				t.Fatalf("a frame of %d ranges decoded (%d) with %d of the turn's %d used", c.n, len(rs), c.done, maxRangesInTurn)
			}
			if alloc > 4*uint64(len(body)) {
				t.Fatalf("refusing a %d-byte RANGES frame (%v) allocated %.1f MB", len(body), err, float64(alloc)/1e6)
			}
		})
	}
}

// TestSync_RangesLoneEndSkip: a RANGES frame whose only range is the end of
// the set with Skip (2 bytes, the least the grammar allows) decodes; it was
// once refused as a protocol violation, a strike against an honest peer.
func TestSync_RangesLoneEndSkip(t *testing.T) {
	rd := rangeDecoder{}
	rs, err := rd.decode([]byte{frameRanges, 1, 0, modeSkip})
	if err != nil || len(rs) != 1 || rs[0].mode != modeSkip || !rd.ended {
		t.Fatalf("decoded %+v (ended %v), %v; want one Skip to the end of the set", rs, rd.ended, err)
	}
}
