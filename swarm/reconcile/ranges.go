package reconcile

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm/internal/wire"
)

// Mode is how a range of a RANGES frame describes the sender's items.
type Mode byte

// Range modes (negentropy style).
const (
	Skip        Mode = 0 // nothing to do in this range
	Fingerprint Mode = 1 // count and fingerprint of the sender's items
	IDList      Mode = 2 // every item of the sender in the range, as short ids
	Sketch      Mode = 3 // count and a RIBLT sketch of the sender's items (sketch.go)
)

// ShortIDBytes is how much of a claim id names it inside one range: with
// the timestamp, 6 bytes make a collision between different claims of one
// small range vanishingly unlikely, at a fifth of the cost of full ids.
const ShortIDBytes = 6

// FPBytes is how much of a range fingerprint travels: with the count,
// 8 bytes make two different ranges look equal with probability 2^-64.
const FPBytes = 8

// Limits on what one turn of the peer may hold. An honest turn has at most
// Params.MaxOut ranges (each maybe after a skip) and, with id lists and
// sketches, about 24 MB; a peer must not make a node buffer more.
const (
	MaxRangesInTurn     = 1 << 17
	MaxRangeBytesInTurn = 32 << 20
	MaxWantsInTurn      = 1 << 20 // wanted claims one turn may ask for
)

// FP is a range fingerprint as it travels.
type FP [FPBytes]byte

// WireFingerprint cuts a store fingerprint to its travelling size.
func WireFingerprint(fp store.Fingerprint) (w FP) {
	copy(w[:], fp[:])
	return w
}

// ShortID names an item in id lists and want lists: its ts and the first
// ShortIDBytes of its id.
type ShortID struct {
	TS  uint64
	Pre [ShortIDBytes]byte
}

// ShortOf is the short id of it.
func ShortOf(it store.SyncItem) ShortID {
	s := ShortID{TS: it.TS}
	copy(s.Pre[:], it.ID[:ShortIDBytes])
	return s
}

// Compare orders short ids by (ts, prefix).
func (a ShortID) Compare(b ShortID) int {
	switch {
	case a.TS < b.TS:
		return -1
	case a.TS > b.TS:
		return 1
	}
	for i := range a.Pre {
		switch {
		case a.Pre[i] < b.Pre[i]:
			return -1
		case a.Pre[i] > b.Pre[i]:
			return 1
		}
	}
	return 0
}

// Span returns the items range [lo, hi) that holds every item with this
// short id.
func (a ShortID) Span() (lo, hi store.SyncItem) {
	lo.TS = a.TS
	copy(lo.ID[:], a.Pre[:])
	hi = lo
	for i := ShortIDBytes - 1; i >= 0; i-- { // hi = prefix + 1
		hi.ID[i]++
		if hi.ID[i] != 0 {
			return lo, hi
		}
	}
	if a.TS == math.MaxUint64 {
		return lo, store.MaxSyncItem
	}
	return lo, store.SyncItem{TS: a.TS + 1}
}

// Range is one range of a RANGES frame. Its lower bound is the upper bound
// of the range before it (store.MinSyncItem for the first of a turn).
type Range struct {
	Upper store.SyncItem // exclusive; store.MaxSyncItem means "to the end"
	Mode  Mode
	Count uint64    // Fingerprint, Sketch: the sender's items in the range
	FP    FP        // Fingerprint
	IDs   []ShortID // IDList
	syms  []codedSym
}

// symBytes is the least encoded size of a coded symbol: count, offset sum,
// prefix sum, checksum.
const symBytes = 1 + 1 + ShortIDBytes + 8

// rangeEncoder appends ranges to RANGES frames, carrying the bound delta
// state across the frames of one turn.
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

func (e *rangeEncoder) appendRange(b []byte, lowerTS uint64, r *Range) []byte {
	b = e.appendBound(b, r.Upper)
	b = append(b, byte(r.Mode))
	switch r.Mode {
	case Fingerprint:
		b = binary.AppendUvarint(b, r.Count)
		b = append(b, r.FP[:]...)
	case IDList:
		b = binary.AppendUvarint(b, uint64(len(r.IDs)))
		prev := lowerTS
		for _, s := range r.IDs {
			b = binary.AppendUvarint(b, s.TS-prev)
			b = append(b, s.Pre[:]...)
			prev = s.TS
		}
	case Sketch:
		b = binary.AppendUvarint(b, r.Count)
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

// rangeSize bounds the encoded size of r (for frame filling).
func rangeSize(r *Range) int {
	n := 2*binary.MaxVarintLen64 + 32 + 1
	switch r.Mode {
	case Fingerprint:
		n += binary.MaxVarintLen64 + len(r.FP)
	case IDList:
		n += binary.MaxVarintLen64 + len(r.IDs)*(binary.MaxVarintLen64+ShortIDBytes)
	case Sketch:
		n += 2*binary.MaxVarintLen64 + len(r.syms)*(2*binary.MaxVarintLen64+ShortIDBytes+8)
	}
	return n
}

// EncodeRanges splits a turn's ranges into RANGES frames of at most
// wire.MaxFrame bytes. Trailing skips are dropped (the rest of the set is
// implicitly skipped).
func EncodeRanges(ranges []Range) [][]byte {
	for len(ranges) > 0 && ranges[len(ranges)-1].Mode == Skip {
		ranges = ranges[:len(ranges)-1]
	}
	var frames [][]byte
	var enc rangeEncoder
	lower := store.MinSyncItem
	i := 0
	for i < len(ranges) {
		body := []byte{}
		n := 0
		for i+n < len(ranges) && (n == 0 || len(body)+rangeSize(&ranges[i+n]) < wire.MaxFrame-16) {
			body = enc.appendRange(body, lower.TS, &ranges[i+n])
			lower = ranges[i+n].Upper
			n++
		}
		frame := make([]byte, 0, 1+binary.MaxVarintLen64+len(body))
		frame = append(frame, wire.Ranges)
		frame = binary.AppendUvarint(frame, uint64(n))
		frames = append(frames, append(frame, body...))
		i += n
	}
	return frames
}

// RangeDecoder decodes the RANGES frames of one turn, checking that bounds
// strictly increase and nothing follows the end of the set. The zero value
// starts a turn.
type RangeDecoder struct {
	prevTS uint64
	lower  store.SyncItem
	ended  bool
	n      int // ranges decoded this turn
}

// minRange is the least encoded size of one range: the end of the set (one
// byte) and Skip, the only mode with no body. The grammar allows it, so a
// peer that ends its turn with it is no violator.
const minRange = 2

// Decode decodes one RANGES frame of a turn. A decoded range takes about
// 40 times its least encoded size, so the count is checked against what
// the turn still allows before anything is allocated, and the slice grows
// only as ranges actually decode.
func (rd *RangeDecoder) Decode(frame []byte) ([]Range, error) {
	d := wire.NewDec(frame[1:])
	n := d.Count(minRange)
	if d.Err() == nil && n > MaxRangesInTurn-rd.n {
		d.Fail("more than %d ranges in one turn", MaxRangesInTurn)
		n = 0
	}
	out := make([]Range, 0, min(n, 1024))
	for range n {
		if d.Err() != nil {
			break
		}
		if rd.ended {
			d.Fail("range after the end of the set")
			break
		}
		var r Range
		if !rd.decodeBound(d, &r) {
			break
		}
		r.Mode = Mode(d.Byte())
		decodeBody(d, &r, rd.lower.TS)
		rd.lower = r.Upper
		out = append(out, r)
	}
	if err := d.Done(); err != nil {
		return nil, err
	}
	rd.n += len(out)
	return out, nil
}

// decodeBound reads r's upper bound; false when it broke the grammar.
func (rd *RangeDecoder) decodeBound(d *wire.Dec, r *Range) bool {
	enc := d.Uvarint()
	if enc == 0 {
		r.Upper = store.MaxSyncItem
		rd.ended = true
	} else {
		delta := enc - 1
		if delta > math.MaxUint64-rd.prevTS {
			d.Fail("bound timestamp overflows")
			return false
		}
		r.Upper.TS = rd.prevTS + delta
		rd.prevTS = r.Upper.TS
		k := d.Uvarint()
		if k > 32 {
			d.Fail("bound id prefix of %d bytes", k)
			return false
		}
		copy(r.Upper.ID[:], d.Bytes(int(k)))
	}
	if d.Err() == nil && r.Upper.Compare(rd.lower) <= 0 {
		d.Fail("range bounds do not increase")
		return false
	}
	return true
}

// decodeBody reads what follows r's mode byte; lowerTS is its lower bound's ts.
func decodeBody(d *wire.Dec, r *Range, lowerTS uint64) {
	switch r.Mode {
	case Skip:
	case Fingerprint:
		r.Count = d.Uvarint()
		copy(r.FP[:], d.Bytes(len(r.FP)))
	case IDList:
		r.IDs = decodeIDList(d, lowerTS, r.Upper.TS)
	case Sketch:
		r.Count = d.Uvarint()
		r.syms = decodeSyms(d)
	default:
		d.Fail("unknown range mode %d", r.Mode)
	}
}

// decodeIDList reads an id list whose ts deltas start at lowerTS and whose
// ids lie at or below upperTS, strictly increasing.
func decodeIDList(d *wire.Dec, lowerTS, upperTS uint64) []ShortID {
	k := d.Count(1 + ShortIDBytes)
	ids := make([]ShortID, 0, k)
	prev := lowerTS
	for range k {
		s, ok := decodeShort(d, prev)
		if !ok {
			break
		}
		if len(ids) > 0 && s.Compare(ids[len(ids)-1]) <= 0 {
			d.Fail("id list not strictly increasing")
			break
		}
		if s.TS > upperTS {
			d.Fail("id beyond its range")
			break
		}
		ids = append(ids, s)
		prev = s.TS
	}
	return ids
}

// decodeShort reads one (ts delta from prev, prefix) entry.
func decodeShort(d *wire.Dec, prev uint64) (ShortID, bool) {
	delta := d.Uvarint()
	if d.Err() != nil {
		return ShortID{}, false
	}
	if delta > math.MaxUint64-prev {
		d.Fail("timestamp overflows")
		return ShortID{}, false
	}
	s := ShortID{TS: prev + delta}
	copy(s.Pre[:], d.Bytes(ShortIDBytes))
	return s, d.Err() == nil
}

// decodeSyms reads a sketch's coded symbols (1 … maxSketchSyms).
func decodeSyms(d *wire.Dec) []codedSym {
	k := d.Count(symBytes)
	if d.Err() == nil && (k == 0 || k > maxSketchSyms) {
		d.Fail("sketch of %d symbols", k)
		return nil
	}
	syms := make([]codedSym, k)
	for i := range syms {
		c := &syms[i]
		c.count = d.Varint()
		c.sum.off = d.Uvarint()
		copy(c.sum.pre[:], d.Bytes(ShortIDBytes))
		c.chk = d.Uint64()
		if d.Err() != nil {
			break
		}
	}
	return syms
}

// ---- WANT ----

// AppendWant encodes a WANT frame: short ids in increasing order, ts as
// deltas.
func AppendWant(b []byte, ids []ShortID) []byte {
	b = append(b, wire.Want)
	b = binary.AppendUvarint(b, uint64(len(ids)))
	var prev uint64
	for _, s := range ids {
		b = binary.AppendUvarint(b, s.TS-prev)
		b = append(b, s.Pre[:]...)
		prev = s.TS
	}
	return b
}

// MaxWantPerFrame keeps a WANT frame under wire.MaxFrame.
const MaxWantPerFrame = wire.MaxFrame / (binary.MaxVarintLen64 + ShortIDBytes)

// DecodeWant decodes a WANT frame; its entries strictly increase.
func DecodeWant(frame []byte) ([]ShortID, error) {
	d := wire.NewDec(frame[1:])
	n := d.Count(1 + ShortIDBytes)
	out := make([]ShortID, 0, n)
	var prev uint64
	for range n {
		s, ok := decodeShort(d, prev)
		if !ok {
			break
		}
		if len(out) > 0 && s.Compare(out[len(out)-1]) <= 0 {
			d.Fail("want list not strictly increasing")
			break
		}
		out = append(out, s)
		prev = s.TS
	}
	if err := d.Done(); err != nil {
		return nil, err
	}
	return out, nil
}

// CompactWants sorts wants, drops repeats and keeps what one turn may ask:
// a peer's id lists within the turn's limits can name millions of claims
// we lack; the rest come in a later session.
func CompactWants(wants []ShortID) []ShortID {
	slices.SortFunc(wants, ShortID.Compare)
	wants = slices.Compact(wants)
	return wants[:min(len(wants), MaxWantsInTurn)]
}
