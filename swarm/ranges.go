package swarm

import (
	"encoding/binary"
	"math"

	"github.com/metanode/metanode/store"
)

// Range modes of a RANGES frame (negentropy style).
const (
	modeSkip        byte = 0 // nothing to do in this range
	modeFingerprint byte = 1 // count and fingerprint of the sender's items
	modeIDList      byte = 2 // every item of the sender in the range, as short ids
	modeSketch      byte = 3 // count and a RIBLT sketch of the sender's items (sketch.go)
)

// shortIDBytes is how much of a claim id names it inside one range: with
// the timestamp, 8 bytes make a collision between different claims of one
// small range vanishingly unlikely, at a quarter of the cost of full ids.
const shortIDBytes = 6

// wireFPBytes is how much of a range fingerprint travels: with the count,
// 8 bytes make two different ranges look equal with probability 2^-64 per
// comparison, and each fingerprint entry costs a third less than with 16.
const wireFPBytes = 8

// wireFP is a range fingerprint as it travels.
type wireFP [wireFPBytes]byte

func wireFingerprint(fp store.Fingerprint) (w wireFP) {
	copy(w[:], fp[:])
	return w
}

// shortID names an item in id lists and want lists.
type shortID struct {
	ts  uint64
	pre [shortIDBytes]byte
}

func shortOf(it store.SyncItem) shortID {
	s := shortID{ts: it.TS}
	copy(s.pre[:], it.ID[:shortIDBytes])
	return s
}

func (a shortID) compare(b shortID) int {
	switch {
	case a.ts < b.ts:
		return -1
	case a.ts > b.ts:
		return 1
	}
	for i := range a.pre {
		switch {
		case a.pre[i] < b.pre[i]:
			return -1
		case a.pre[i] > b.pre[i]:
			return 1
		}
	}
	return 0
}

// span returns the items range [lo, hi) that holds every item with this
// short id.
func (a shortID) span() (lo, hi store.SyncItem) {
	lo.TS = a.ts
	copy(lo.ID[:], a.pre[:])
	hi = lo
	for i := shortIDBytes - 1; i >= 0; i-- { // hi = prefix + 1
		hi.ID[i]++
		if hi.ID[i] != 0 {
			return lo, hi
		}
	}
	if a.ts == math.MaxUint64 {
		return lo, store.MaxSyncItem
	}
	return lo, store.SyncItem{TS: a.ts + 1}
}

// rangeEntry is one range of a RANGES frame. Its lower bound is the upper
// bound of the entry before it (store.MinSyncItem for the first).
type rangeEntry struct {
	upper store.SyncItem // exclusive; store.MaxSyncItem means "to the end"
	mode  byte
	count uint64
	fp    wireFP
	ids   []shortID
	syms  []codedSym
}

// symBytes is the least encoded size of a coded symbol: count, offset sum,
// prefix sum, checksum.
const symBytes = 1 + 1 + shortIDBytes + 8

// rangeEncoder appends range entries to RANGES frames, carrying the bound
// delta state across the frames of one turn.
type rangeEncoder struct{ prevTS uint64 }

// appendBound encodes upper: 0 for the end of the set, else 1 + the ts delta
// from the previous bound, then the id with trailing zero bytes trimmed.
func (e *rangeEncoder) appendBound(b []byte, upper store.SyncItem) []byte {
	if upper == store.MaxSyncItem {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, 1+upper.TS-e.prevTS)
	e.prevTS = upper.TS
	n := len(upper.ID)
	for n > 0 && upper.ID[n-1] == 0 {
		n--
	}
	b = binary.AppendUvarint(b, uint64(n))
	return append(b, upper.ID[:n]...)
}

func (e *rangeEncoder) appendEntry(b []byte, lowerTS uint64, r *rangeEntry) []byte {
	b = e.appendBound(b, r.upper)
	b = append(b, r.mode)
	switch r.mode {
	case modeFingerprint:
		b = binary.AppendUvarint(b, r.count)
		b = append(b, r.fp[:]...)
	case modeIDList:
		b = binary.AppendUvarint(b, uint64(len(r.ids)))
		prev := lowerTS
		for _, s := range r.ids {
			b = binary.AppendUvarint(b, s.ts-prev)
			b = append(b, s.pre[:]...)
			prev = s.ts
		}
	case modeSketch:
		b = binary.AppendUvarint(b, r.count)
		b = binary.AppendUvarint(b, uint64(len(r.syms)))
		for i := range r.syms {
			c := &r.syms[i]
			b = binary.AppendVarint(b, c.count)
			b = binary.AppendUvarint(b, c.sum.off)
			b = append(b, c.sum.pre[:]...)
			b = binary.LittleEndian.AppendUint64(b, c.chk)
		}
	}
	return b
}

// entrySize bounds the encoded size of r (for frame filling).
func entrySize(r *rangeEntry) int {
	n := 2*binary.MaxVarintLen64 + 32 + 1
	switch r.mode {
	case modeFingerprint:
		n += binary.MaxVarintLen64 + len(r.fp)
	case modeIDList:
		n += binary.MaxVarintLen64 + len(r.ids)*(binary.MaxVarintLen64+shortIDBytes)
	case modeSketch:
		n += 2*binary.MaxVarintLen64 + len(r.syms)*(2*binary.MaxVarintLen64+shortIDBytes+8)
	}
	return n
}

// encodeRanges splits entries into RANGES frames of at most maxFrame bytes.
// Trailing skips are dropped (the rest of the set is implicitly skipped).
func encodeRanges(entries []rangeEntry) [][]byte {
	for len(entries) > 0 && entries[len(entries)-1].mode == modeSkip {
		entries = entries[:len(entries)-1]
	}
	var frames [][]byte
	var enc rangeEncoder
	lower := store.MinSyncItem
	i := 0
	for i < len(entries) {
		body := []byte{}
		n := 0
		for i+n < len(entries) && (n == 0 || len(body)+entrySize(&entries[i+n]) < maxFrame-16) {
			body = enc.appendEntry(body, lower.TS, &entries[i+n])
			lower = entries[i+n].upper
			n++
		}
		frame := make([]byte, 0, 1+binary.MaxVarintLen64+len(body))
		frame = append(frame, frameRanges)
		frame = binary.AppendUvarint(frame, uint64(n))
		frames = append(frames, append(frame, body...))
		i += n
	}
	return frames
}

// rangeDecoder decodes the RANGES frames of one turn, checking that bounds
// strictly increase and nothing follows the end of the set.
type rangeDecoder struct {
	prevTS uint64
	lower  store.SyncItem
	ended  bool
	n      int // ranges decoded this turn
}

// minEntry is the least encoded size of one entry: the end of the set (one
// byte) and Skip, the only mode with no body. The grammar allows it, so a
// peer that ends its turn with it is no violator.
const minEntry = 2

// decode decodes one RANGES frame of a turn. A decoded range takes about
// 40 times its least encoded size, so the count is checked against what
// the turn still allows before anything is allocated, and the slice grows
// only as entries actually decode.
func (rd *rangeDecoder) decode(frame []byte) ([]rangeEntry, error) {
	d := dec{b: frame[1:]}
	n := d.count(minEntry)
	if d.err == nil && n > maxRangesInTurn-rd.n {
		d.fail("more than %d ranges in one turn", maxRangesInTurn)
		n = 0
	}
	out := make([]rangeEntry, 0, min(n, 1024))
	for range n {
		if d.err != nil {
			break
		}
		if rd.ended {
			d.fail("range after the end of the set")
			break
		}
		var r rangeEntry
		enc := d.uvarint()
		if enc == 0 {
			r.upper = store.MaxSyncItem
			rd.ended = true
		} else {
			delta := enc - 1
			if delta > math.MaxUint64-rd.prevTS {
				d.fail("bound timestamp overflows")
				break
			}
			r.upper.TS = rd.prevTS + delta
			rd.prevTS = r.upper.TS
			k := d.uvarint()
			if k > 32 {
				d.fail("bound id prefix of %d bytes", k)
				break
			}
			copy(r.upper.ID[:], d.bytes(int(k)))
		}
		if d.err == nil && r.upper.Compare(rd.lower) <= 0 {
			d.fail("range bounds do not increase")
			break
		}
		r.mode = d.byte()
		switch r.mode {
		case modeSkip:
		case modeFingerprint:
			r.count = d.uvarint()
			copy(r.fp[:], d.bytes(len(r.fp)))
		case modeIDList:
			k := d.count(1 + shortIDBytes)
			r.ids = make([]shortID, 0, k)
			prev := rd.lower.TS
			for range k {
				delta := d.uvarint()
				if d.err != nil {
					break
				}
				if delta > math.MaxUint64-prev {
					d.fail("id timestamp overflows")
					break
				}
				s := shortID{ts: prev + delta}
				copy(s.pre[:], d.bytes(shortIDBytes))
				if len(r.ids) > 0 && s.compare(r.ids[len(r.ids)-1]) <= 0 {
					d.fail("id list not strictly increasing")
					break
				}
				if s.ts > r.upper.TS {
					d.fail("id beyond its range")
					break
				}
				r.ids = append(r.ids, s)
				prev = s.ts
			}
		case modeSketch:
			r.count = d.uvarint()
			k := d.count(symBytes)
			if d.err == nil && (k == 0 || k > maxSketchSyms) {
				d.fail("sketch of %d symbols", k)
				break
			}
			r.syms = make([]codedSym, k)
			for i := range r.syms {
				c := &r.syms[i]
				c.count = d.varint()
				c.sum.off = d.uvarint()
				copy(c.sum.pre[:], d.bytes(shortIDBytes))
				c.chk = d.uint64()
				if d.err != nil {
					break
				}
			}
		default:
			d.fail("unknown range mode %d", r.mode)
		}
		rd.lower = r.upper
		out = append(out, r)
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	rd.n += len(out)
	return out, nil
}

// ---- WANT ----

// appendWant encodes a WANT frame: short ids in increasing order, ts as
// deltas.
func appendWant(b []byte, ids []shortID) []byte {
	b = append(b, frameWant)
	b = binary.AppendUvarint(b, uint64(len(ids)))
	var prev uint64
	for _, s := range ids {
		b = binary.AppendUvarint(b, s.ts-prev)
		b = append(b, s.pre[:]...)
		prev = s.ts
	}
	return b
}

// maxWantPerFrame keeps a WANT frame under maxFrame.
const maxWantPerFrame = maxFrame / (binary.MaxVarintLen64 + shortIDBytes)

func decodeWant(frame []byte) ([]shortID, error) {
	d := dec{b: frame[1:]}
	n := d.count(1 + shortIDBytes)
	out := make([]shortID, 0, n)
	var prev uint64
	for range n {
		delta := d.uvarint()
		if d.err != nil {
			break
		}
		if delta > math.MaxUint64-prev {
			d.fail("want timestamp overflows")
			break
		}
		s := shortID{ts: prev + delta}
		copy(s.pre[:], d.bytes(shortIDBytes))
		if len(out) > 0 && s.compare(out[len(out)-1]) <= 0 {
			d.fail("want list not strictly increasing")
			break
		}
		out = append(out, s)
		prev = s.ts
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	return out, nil
}
