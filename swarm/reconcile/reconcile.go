package reconcile

import (
	"math"
	"slices"

	"github.com/metanode/metanode/store"
)

// Params are the tuning knobs; the two sides of a session may use
// different ones.
type Params struct {
	Split    int // ranges a differing range is split into
	First    int // ranges of the initiator's first turn
	IDList   int // a range with at most this many items is sent as an id list
	MaxOut   int // ranges per turn before the rest is deferred to a later turn
	EnumCap  int // id-list ranges holding more of ours than this are streamed, not listed
	MaxSplit int // adaptive split: at most this many parts when one split reaches id lists
}

// DefaultParams are the parameters docs/protocols.md describes.
var DefaultParams = Params{
	Split:    16,
	First:    64,
	IDList:   32,
	MaxOut:   1 << 16,
	EnumCap:  4096,
	MaxSplit: 64,
}

// setView is the local side of a reconciliation: the store's sync set plus
// the claims this node refused (untrusted signers), which count as held so
// that peers stop offering them.
type setView struct {
	set   *store.SyncSet
	extra []store.SyncItem // sorted, not in set
}

func (v *setView) extraIn(lo, hi store.SyncItem) []store.SyncItem {
	i, _ := slices.BinarySearchFunc(v.extra, lo, store.SyncItem.Compare)
	j, _ := slices.BinarySearchFunc(v.extra, hi, store.SyncItem.Compare)
	if j < i {
		return nil
	}
	return v.extra[i:j]
}

func (v *setView) summary(lo, hi store.SyncItem) store.Accumulator {
	acc := v.set.Summary(lo, hi)
	for _, it := range v.extraIn(lo, hi) {
		acc.Add(it.ID)
	}
	return acc
}

// items returns the items of [lo, hi) in order, refused ones included.
func (v *setView) items(lo, hi store.SyncItem) []store.SyncItem {
	own := v.set.Items(lo, hi, 0)
	ex := v.extraIn(lo, hi)
	if len(ex) == 0 {
		return own
	}
	out := make([]store.SyncItem, 0, len(own)+len(ex))
	out = append(out, own...)
	out = append(out, ex...)
	slices.SortFunc(out, store.SyncItem.Compare)
	return out
}

func (v *setView) hasShort(s ShortID) bool {
	lo, hi := s.Span()
	if len(v.set.Items(lo, hi, 1)) > 0 {
		return true
	}
	return len(v.extraIn(lo, hi)) > 0
}

func (v *setView) isExtra(it store.SyncItem) bool {
	_, ok := slices.BinarySearchFunc(v.extra, it, store.SyncItem.Compare)
	return ok
}

// minBound returns the shortest bound b' with prev < b' <= b and no item in
// [b', b): it partitions the set exactly as b does but encodes in fewer bytes.
func (v *setView) minBound(prev, b store.SyncItem) store.SyncItem {
	if b.TS == math.MaxUint64 { // never a claim's ts: the end of the set
		return store.MaxSyncItem
	}
	for k := 0; k < len(b.ID); k++ {
		cand := store.SyncItem{TS: b.TS}
		copy(cand.ID[:k], b.ID[:k])
		if cand.Compare(prev) <= 0 || (k > 0 && b.ID[k-1] == 0) {
			continue
		}
		if v.summary(cand, b).Count() == 0 {
			return cand
		}
	}
	return b
}

// PushRange asks the sender to stream every claim it holds in [Lo, Hi)
// except those whose short id is in Skip.
type PushRange struct {
	Lo, Hi store.SyncItem
	Skip   map[ShortID]struct{}
}

// Plan is what one side sends in its next turn.
type Plan struct {
	Ranges     []Range
	PushItems  []store.SyncItem // claims the peer lacks
	PushRanges []PushRange      // whole ranges the peer lacks
	Wants      []ShortID        // claims this side lacks
}

// Final reports whether the turn ends the session: nothing is asked of
// the peer.
func (p *Plan) Final() bool { return len(p.Ranges) == 0 && len(p.Wants) == 0 }

// Reconciler plans one side's turns of one session.
type Reconciler struct {
	// Push: the peer accepts claims (its HELLO did not say FlagNoPush).
	Push bool
	// Want: this side accepts claims (not an interest-mode node).
	Want bool
	// Sketch: the peer reads Sketch ranges.
	Sketch bool

	view     setView
	p        Params
	coded    int // sketch work this session: items coded and symbols sent (spend)
	turnSyms int // sketch symbols in the turn being planned
}

// New returns a reconciler over set, counting refused (sorted, none in
// set) as held; it pushes and wants until told otherwise, and sends
// sketches once the peer's HELLO says it reads them.
func New(set *store.SyncSet, refused []store.SyncItem, p Params) *Reconciler {
	return &Reconciler{Push: true, Want: true, view: setView{set: set, extra: refused}, p: p}
}

// Set is the sync set the reconciler describes.
func (r *Reconciler) Set() *store.SyncSet { return r.view.set }

// Hello is this side's HELLO.
func (r *Reconciler) Hello() Hello {
	flags := FlagSketch
	if !r.Want {
		flags |= FlagNoPush
	}
	return Hello{Version: Version, Flags: flags, SetLen: uint64(r.view.set.Len())}
}

// ApplyHello takes the peer's HELLO into account.
func (r *Reconciler) ApplyHello(h Hello) {
	r.Sketch = h.Flags&FlagSketch != 0
	if h.Flags&FlagNoPush != 0 {
		r.Push = false
	}
}

// rangeOut builds a turn's ranges: skips are implicit and coalesced, only a
// gap before a non-skip range is written out.
type rangeOut struct {
	out  []Range
	last store.SyncItem
}

func (o *rangeOut) add(lo store.SyncItem, e Range) {
	if n := len(o.out); n > 0 && lo == o.last && e.Mode == Fingerprint && e.Count == 0 &&
		o.out[n-1].Mode == Fingerprint && o.out[n-1].Count == 0 {
		o.out[n-1].Upper = e.Upper // adjacent empty ranges: one "I hold nothing here"
		o.last = e.Upper
		return
	}
	if lo.Compare(o.last) > 0 {
		o.out = append(o.out, Range{Upper: lo, Mode: Skip})
	}
	o.out = append(o.out, e)
	o.last = e.Upper
}

func (r *Reconciler) fingerprint(lo, hi store.SyncItem) Range {
	acc := r.view.summary(lo, hi)
	return Range{Upper: hi, Mode: Fingerprint, Count: uint64(acc.Count()), FP: WireFingerprint(acc.Fingerprint())}
}

func (r *Reconciler) idList(hi store.SyncItem, items []store.SyncItem) Range {
	ids := make([]ShortID, 0, len(items))
	for _, it := range items {
		s := ShortOf(it)
		if len(ids) > 0 && ids[len(ids)-1] == s {
			continue // a short-id collision inside one range: list it once
		}
		ids = append(ids, s)
	}
	return Range{Upper: hi, Mode: IDList, IDs: ids}
}

// describe adds the ranges that describe our items of [lo, hi), which hold
// m items: an id list when small, else fingerprints of parts.
func (r *Reconciler) describe(o *rangeOut, lo, hi store.SyncItem, m, parts int) {
	if m <= r.p.IDList {
		o.add(lo, r.idList(hi, r.view.items(lo, hi)))
		return
	}
	// When one split reaches id-list size, split just that much: the next
	// message is then the id lists, a round trip sooner.
	if need := (m + r.p.IDList - 1) / r.p.IDList; need <= r.p.MaxSplit {
		parts = max(parts, need)
	}
	prev := r.cut(o, lo, hi, r.view.set.Split(lo, hi, parts))
	if prev == lo {
		// No own item to cut at (at most one here): the rest of m are
		// refused items, which count in the fingerprints too. Cut over
		// them, or two homes whose refused sets differ here would bounce
		// one fingerprint of this range until the turn limit. Cheap: the
		// refused items are a slice, and we hold at most one item here.
		prev = r.cut(o, lo, hi, splitItems(r.view.items(lo, hi), parts))
	}
	o.add(prev, r.fingerprint(prev, hi))
}

// cut adds a fingerprint for each part of [lo, hi) before the cuts that
// fall strictly inside it and returns the lower bound of the last part.
func (r *Reconciler) cut(o *rangeOut, lo, hi store.SyncItem, cuts []store.SyncItem) store.SyncItem {
	prev := lo
	for _, c := range cuts {
		b := r.view.minBound(prev, c)
		if b.Compare(prev) <= 0 || b.Compare(hi) >= 0 {
			continue
		}
		o.add(prev, r.fingerprint(prev, b))
		prev = b
	}
	return prev
}

// splitItems is store.SyncSet.Split over a sorted slice: up to parts-1
// boundaries, each the first item of a run of near-equal size.
func splitItems(items []store.SyncItem, parts int) []store.SyncItem {
	parts = min(parts, len(items))
	var out []store.SyncItem
	for k := 1; k < parts; k++ {
		out = append(out, items[k*len(items)/parts])
	}
	return out
}

// Initial is the initiator's first turn: its whole set described.
func (r *Reconciler) Initial() Plan {
	var o rangeOut
	lo, hi := store.MinSyncItem, store.MaxSyncItem
	m := r.view.summary(lo, hi).Count()
	switch {
	case m == 0:
		o.add(lo, r.fingerprint(lo, hi))
	case m < r.p.First*r.p.IDList:
		// A small set: parts of about id-list size (describe grows parts
		// from 2 to what reaches id lists in one split).
		r.describe(&o, lo, hi, m, 2)
	default:
		r.describe(&o, lo, hi, m, r.p.First)
	}
	return Plan{Ranges: o.out}
}

// turn is the state of one Respond call.
type turn struct {
	plan     Plan
	o        rangeOut
	deferred bool // the rest of the set is described by one fingerprint
}

// Respond processes the peer's ranges and plans the answer.
func (r *Reconciler) Respond(in []Range) Plan {
	var t turn
	lo := store.MinSyncItem
	r.turnSyms = 0
	for _, e := range in {
		hi := e.Upper
		switch e.Mode {
		case Fingerprint:
			if !t.deferred {
				r.answerFingerprint(&t, lo, hi, &e)
			}
		case IDList:
			r.resolve(&t.plan, lo, hi, e.IDs)
		case Sketch:
			if !t.deferred && len(t.o.out) >= r.p.MaxOut {
				r.deferRest(&t, lo) // as for a fingerprint
			}
			r.answerSketch(&t.plan, &t.o, lo, hi, &e, t.deferred)
		}
		lo = hi
	}
	t.plan.Ranges = t.o.out
	return t.plan
}

// deferRest describes the rest of the set from lo with one fingerprint:
// the turn holds enough ranges; the peer splits it again next turn.
func (r *Reconciler) deferRest(t *turn, lo store.SyncItem) {
	t.o.add(lo, r.fingerprint(lo, store.MaxSyncItem))
	t.deferred = true
}

// answerFingerprint answers the peer's fingerprint of [lo, hi).
func (r *Reconciler) answerFingerprint(t *turn, lo, hi store.SyncItem, e *Range) {
	acc := r.view.summary(lo, hi)
	m := acc.Count()
	switch {
	case uint64(m) == e.Count && WireFingerprint(acc.Fingerprint()) == e.FP:
		// equal
	case e.Count == 0: // the peer holds nothing here: stream it all
		if r.Push {
			t.plan.PushRanges = append(t.plan.PushRanges, PushRange{Lo: lo, Hi: hi})
		}
	case m == 0: // we hold nothing: say so, the peer streams
		if r.Want {
			t.o.add(lo, r.fingerprint(lo, hi))
		}
	case len(t.o.out) >= r.p.MaxOut:
		r.deferRest(t, lo)
	default:
		r.describeOrSketch(&t.o, lo, hi, m, int(min(e.Count, math.MaxInt32)))
	}
}

// resolve compares the peer's id list of [lo, hi) with our items there: we
// then know both differences and settle the range.
func (r *Reconciler) resolve(plan *Plan, lo, hi store.SyncItem, theirs []ShortID) {
	if !r.Push && !r.Want {
		return
	}
	if r.view.set.Summary(lo, hi).Count() > r.p.EnumCap {
		r.resolveStreamed(plan, lo, hi, theirs)
		return
	}
	mine := r.view.items(lo, hi)
	i, j := 0, 0
	for i < len(mine) || j < len(theirs) {
		var c int
		switch {
		case i == len(mine):
			c = 1
		case j == len(theirs):
			c = -1
		default:
			c = ShortOf(mine[i]).Compare(theirs[j])
		}
		switch {
		case c < 0: // ours only
			if r.Push && !r.view.isExtra(mine[i]) {
				plan.PushItems = append(plan.PushItems, mine[i])
			}
			i++
		case c > 0: // theirs only
			if r.Want {
				plan.Wants = append(plan.Wants, theirs[j])
			}
			j++
		default:
			i++
			j++
		}
	}
}

// resolveStreamed settles a range where we hold far more than the peer's
// id list: we stream ours minus theirs.
func (r *Reconciler) resolveStreamed(plan *Plan, lo, hi store.SyncItem, theirs []ShortID) {
	if r.Push {
		skip := make(map[ShortID]struct{}, len(theirs))
		for _, s := range theirs {
			skip[s] = struct{}{}
		}
		plan.PushRanges = append(plan.PushRanges, PushRange{Lo: lo, Hi: hi, Skip: skip})
	}
	if r.Want {
		for _, s := range theirs {
			if !r.view.hasShort(s) {
				plan.Wants = append(plan.Wants, s)
			}
		}
	}
}
