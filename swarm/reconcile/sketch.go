package reconcile

import (
	"math"
	"slices"

	"github.com/metanode/metanode/store"
)

// Range sketches: a rateless invertible Bloom lookup table (RIBLT, after
// Yang, Gilad and Alizadeh, "Practical Rateless Set Reconciliation",
// SIGCOMM 2024) over the items of one range. A sketch of n coded symbols
// is the first n of an endless sequence: every item is XORed into symbol
// 0 and into later symbols with a probability that falls as 1/(1+i/2), so
// any prefix works and a bigger sketch extends a smaller one. The peer
// subtracts its own sketch of the same range and peels the difference:
// about 1.7 symbols of ~17 bytes per differing item, however large the
// range. Fingerprint splitting costs a couple of hundred
// bytes per difference when differences are scattered (each one alone in
// its neighbourhood); sketches take over there. protocols.md gives the
// exact hash and index walk another implementation must reproduce.

const (
	maxSketchSyms = 4096 // coded symbols in one sketch entry (~100 KB)
	minSketchSyms = 8
	// sketchBudget bounds the work of one session's sketches (items coded
	// plus symbols sent), as a multiple of the set (at least 65,536): an
	// honest scattered difference codes the set three or four times; a
	// peer sending sketch after sketch gets fingerprints (cheap to
	// compute) once it is spent.
	sketchBudget = 16
	// A peer's sketch is answered with one at most sketchGrowth times as
	// big, and one turn sends at most maxTurnSketchSyms symbols (~4.5 MB):
	// tiny forged sketches cannot buy big answers.
	sketchGrowth      = 16
	maxTurnSketchSyms = 1 << 18
)

// sketchElem is an item as sketches see it: its short id, with the
// timestamp as an offset from the range's lower bound (small varints).
type sketchElem struct {
	off uint64
	pre [ShortIDBytes]byte
}

func elemOf(it store.SyncItem, base uint64) sketchElem {
	e := sketchElem{off: it.TS - base}
	copy(e.pre[:], it.ID[:ShortIDBytes])
	return e
}

func (e sketchElem) shortID(base uint64) ShortID { return ShortID{TS: base + e.off, Pre: e.pre} }

func (e sketchElem) xor(o sketchElem) sketchElem {
	e.off ^= o.off
	for i := range e.pre {
		e.pre[i] ^= o.pre[i]
	}
	return e
}

// hash is the element's 64-bit hash: its checksum in a symbol and the seed
// of its index walk.
func (e sketchElem) hash() uint64 {
	var p uint64
	for i, b := range e.pre {
		p |= uint64(b) << (8 * i)
	}
	return mix64(e.off ^ mix64(p^0x6d657461_6e6f6465)) // "metanode"
}

// mix64 is the splitmix64 finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// indexWalk yields the symbols an element is coded into: 0, then each next
// index drawn so that index i is hit with probability 1/(1+i/2).
type indexWalk struct{ state, idx uint64 }

func (w *indexWalk) next() uint64 {
	w.state += 0x9e3779b97f4a7c15
	r := float64(mix64(w.state)>>11+1) / (1 << 53) // uniform in (0, 1]
	// The explicit conversions forbid fused multiply-adds: every platform
	// must compute the same gap.
	gap := math.Ceil(float64(float64(float64(w.idx)+1.5) * float64(1/math.Sqrt(r)-1)))
	switch {
	case gap > 1<<40:
		w.idx = math.MaxUint64 // beyond any sketch
	case gap < 1:
		w.idx++
	default:
		w.idx += uint64(gap)
	}
	return w.idx
}

// codedSym is one coded symbol: the XOR of its elements and of their
// hashes, and how many were added minus how many were subtracted.
type codedSym struct {
	sum   sketchElem
	chk   uint64
	count int64
}

// code adds (dir 1) or removes (dir -1) e in every symbol of syms it maps to.
func code(syms []codedSym, e sketchElem, dir int64) {
	h := e.hash()
	w := indexWalk{state: h}
	n := uint64(len(syms))
	for i := uint64(0); i < n; i = w.next() {
		c := &syms[i]
		c.sum = c.sum.xor(e)
		c.chk ^= h
		c.count += dir
	}
}

// buildSketch codes items (all in the range starting at base) into n symbols.
func buildSketch(items []store.SyncItem, base uint64, n int) []codedSym {
	syms := make([]codedSym, n)
	for _, it := range items {
		code(syms, elemOf(it, base), 1)
	}
	return syms
}

// subtractSketch sets d to d − own (both of one size).
func subtractSketch(d, own []codedSym) {
	for i := range d {
		d[i].sum = d[i].sum.xor(own[i].sum)
		d[i].chk ^= own[i].chk
		d[i].count -= own[i].count
	}
}

func (c *codedSym) pure() bool {
	return (c.count == 1 || c.count == -1) && c.sum.hash() == c.chk
}

// peel decodes d = theirs − ours in place. It returns the elements only
// the peer holds (count +1) and only we hold (count −1); ok when nothing
// is left, i.e. d held the whole difference. Bounded: at most len(d)+16
// elements are peeled, so a forged sketch cannot make it loop.
func peel(d []codedSym) (theirs, ours []sketchElem, ok bool) {
	var queue []int
	for i := range d {
		if d[i].pure() {
			queue = append(queue, i)
		}
	}
	budget := len(d) + 16
	for len(queue) > 0 && budget > 0 {
		i := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if !d[i].pure() {
			continue
		}
		budget--
		e, dir := d[i].sum, d[i].count
		if dir > 0 {
			theirs = append(theirs, e)
		} else {
			ours = append(ours, e)
		}
		h := d[i].chk
		w := indexWalk{state: h}
		for j := uint64(0); j < uint64(len(d)); j = w.next() {
			c := &d[j]
			c.sum = c.sum.xor(e)
			c.chk ^= h
			c.count -= dir
			if c.pure() {
				queue = append(queue, int(j))
			}
		}
	}
	for i := range d {
		if d[i] != (codedSym{}) {
			return theirs, ours, false
		}
	}
	return theirs, ours, true
}

// initialSketchSize is the first sketch's size for a range whose two sides
// differ by at least d items (the difference of their counts).
func initialSketchSize(d int) int { return max(minSketchSyms, sketchSizeFor(float64(d))) }

// sketchSizeFor is the size that decodes d differences almost always:
// measured (TestSketch_DecodeRate), 1.7·d symbols decode 100 or more nearly
// every time, and small differences need a few symbols more.
func sketchSizeFor(d float64) int { return int(math.Ceil(1.7*d)) + 6 }

// nextSketchSize sizes the answer to a sketch of len(rest) symbols that did
// not decode: rest is what peeling left, peeled how many items it found.
// The items left are estimated from the symbols' counts. Symbol i holds
// each of the d items left with probability p = 1/(1+i/2), so its count
// (the peer's items minus ours) varies by d·p(1−p) around δ·p, where δ is
// the count of symbol 0 (which holds every item): the squared counts, less
// the part δ explains, sum to about d·Σp(1−p). The answer is sized for
// that estimate, and at least twice as big.
func nextSketchSize(rest []codedSym, peeled int) int {
	delta := float64(rest[0].count)
	var excess, psum float64
	for i := 1; i < len(rest); i++ {
		p := 2 / float64(i+2)
		c, mean := float64(rest[i].count), delta*p
		excess += c*c - mean*mean
		psum += p * (1 - p)
	}
	d := float64(peeled) + math.Abs(delta)
	if psum > 0 {
		d = max(d, float64(peeled)+excess/psum)
	}
	n := 2 * len(rest)
	if m := sketchSizeFor(d); m > n {
		n = m
	}
	return min(n, maxSketchSyms+1) // over the cap: the caller splits instead
}

// sketchCap is the largest sketch worth sending for a range where the two
// sides hold m and c items; past it, splitting into fingerprints is cheaper.
func sketchCap(m, c int) int { return min(maxSketchSyms, (m+c)/4) }

// describeOrSketch answers a range whose fingerprints differ, where we hold
// m items and the peer c: with a sketch when the two sides are mostly alike
// there and the range is too big for an id list, else as describe does.
func (r *Reconciler) describeOrSketch(o *rangeOut, lo, hi store.SyncItem, m, c int) {
	if r.Sketch && m > 2*r.p.IDList && c > 0 {
		d := max(m, c) - min(m, c)
		if n := initialSketchSize(d); 4*d <= max(m, c) && r.canSend(n, m, c) && r.spend(m+n) {
			o.add(lo, r.sketchEntry(lo, hi, r.view.items(lo, hi), n))
			return
		}
	}
	r.describe(o, lo, hi, m, r.p.Split)
}

// spend reports whether k more units of sketch work (items coded, symbols
// sent) stay within the session's budget, and counts them if so.
func (r *Reconciler) spend(k int) bool {
	if r.coded+k > sketchBudget*max(r.view.set.Len(), 1<<16) {
		return false
	}
	r.coded += k
	return true
}

// canSend reports whether a sketch of n symbols is worth sending for a
// range where the two sides hold m and c items, and fits in this turn.
func (r *Reconciler) canSend(n, m, c int) bool {
	return n <= sketchCap(m, c) && r.turnSyms+n <= maxTurnSketchSyms
}

func (r *Reconciler) sketchEntry(lo, hi store.SyncItem, items []store.SyncItem, n int) Range {
	r.turnSyms += n
	return Range{Upper: hi, Mode: Sketch, Count: uint64(len(items)), syms: buildSketch(items, lo.TS, n)}
}

// answerSketch subtracts our sketch of [lo, hi) from the peer's and peels
// the difference. Decoded, the range is settled as an id list settles it:
// we push what the peer lacks and ask for what we lack. Not decoded, we
// answer with a bigger sketch of ours (the peer decodes next), or, past
// the cap, with fingerprints of parts.
func (r *Reconciler) answerSketch(plan *Plan, o *rangeOut, lo, hi store.SyncItem, e *Range, deferred bool) {
	if !r.Push && !r.Want {
		return
	}
	mine := r.view.items(lo, hi)
	switch {
	case e.Count == 0: // the peer holds nothing here: stream it all
		if r.Push && len(mine) > 0 {
			plan.PushRanges = append(plan.PushRanges, PushRange{Lo: lo, Hi: hi})
		}
		return
	case len(mine) == 0: // we hold nothing: say so, the peer streams
		if r.Want && !deferred {
			o.add(lo, r.fingerprint(lo, hi))
		}
		return
	}
	if !r.spend(len(mine)) { // ours to subtract
		if !deferred {
			r.describe(o, lo, hi, len(mine), r.p.Split)
		}
		return
	}
	d := e.syms // decoded from the frame: ours to modify
	subtractSketch(d, buildSketch(mine, lo.TS, len(d)))
	theirs, ours, ok := peel(d)
	if !ok {
		if deferred {
			return // the deferral's fingerprint covers this range
		}
		c := int(min(e.Count, math.MaxInt32))
		// Past the cap the range is split; under it the answer grows at
		// most sketchGrowth times (the estimate comes from the peer).
		n := nextSketchSize(d, len(theirs)+len(ours))
		if n <= sketchCap(len(mine), c) {
			n = min(n, sketchGrowth*len(d))
		}
		if r.canSend(n, len(mine), c) && r.spend(len(mine)+n) {
			o.add(lo, r.sketchEntry(lo, hi, mine, n))
		} else {
			r.describe(o, lo, hi, len(mine), r.p.Split)
		}
		return
	}
	if r.Want {
		for _, x := range theirs {
			if s := x.shortID(lo.TS); s.TS <= hi.TS && s.TS >= lo.TS && !r.view.hasShort(s) {
				plan.Wants = append(plan.Wants, s)
			}
		}
	}
	if r.Push {
		for _, x := range ours {
			s := x.shortID(lo.TS)
			i, _ := slices.BinarySearchFunc(mine, s, func(it store.SyncItem, s ShortID) int { return ShortOf(it).Compare(s) })
			for ; i < len(mine) && ShortOf(mine[i]) == s; i++ {
				if !r.view.isExtra(mine[i]) {
					plan.PushItems = append(plan.PushItems, mine[i])
				}
			}
		}
	}
}
