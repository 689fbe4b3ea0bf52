package swarm

import (
	"math"
	"slices"

	"github.com/metanode/metanode/store"
)

// Range-based set reconciliation over claim (ts, id) items, in the manner of
// negentropy: a side sends fingerprints of ranges; the other splits the
// ranges whose fingerprints differ, answers small ranges with id lists, and
// once it holds the peer's id list for a range it knows both differences
// there: it pushes what the peer lacks and asks for what it lacks. Ranges
// the peer holds nothing of are streamed whole (cold catch-up). The cost is
// proportional to the difference, not to the set.

// reconcileParams are the tuning knobs; both sides may use different ones.
type reconcileParams struct {
	split    int // ranges a differing range is split into
	first    int // ranges of the initiator's first message
	idList   int // a range with at most this many items is sent as an id list
	maxOut   int // ranges per turn before the rest is deferred to a later turn
	enumCap  int // id-list ranges holding more of ours than this are streamed, not listed
	maxSplit int // adaptive split: at most this many parts when one split reaches id lists
}

var defaultReconcileParams = reconcileParams{
	split:    16,
	first:    64,
	idList:   32,
	maxOut:   1 << 16,
	enumCap:  4096,
	maxSplit: 64,
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

func (v *setView) hasShort(s shortID) bool {
	lo, hi := s.span()
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

// pushRange asks the sender to stream every claim it holds in [lo, hi)
// except those whose short id is in skip.
type pushRange struct {
	lo, hi store.SyncItem
	skip   map[shortID]struct{}
}

// turnPlan is what one side sends in its next turn.
type turnPlan struct {
	ranges     []rangeEntry
	pushItems  []store.SyncItem // claims the peer lacks
	pushRanges []pushRange      // whole ranges the peer lacks
	wants      []shortID        // claims this side lacks
}

// final reports whether the turn ends the session: nothing is asked of the
// peer.
func (p *turnPlan) final() bool { return len(p.ranges) == 0 && len(p.wants) == 0 }

type reconciler struct {
	view     setView
	p        reconcileParams
	push     bool // the peer accepts claims
	want     bool // this side accepts claims
	sketch   bool // the peer reads sketch ranges
	coded    int  // sketch work this session: items coded and symbols sent (spend)
	turnSyms int  // sketch symbols in the turn being planned
}

// rangeOut builds a turn's ranges: skips are implicit and coalesced, only a
// gap before a non-skip range is written out.
type rangeOut struct {
	out  []rangeEntry
	last store.SyncItem
}

func (o *rangeOut) add(lo store.SyncItem, e rangeEntry) {
	if n := len(o.out); n > 0 && lo == o.last && e.mode == modeFingerprint && e.count == 0 &&
		o.out[n-1].mode == modeFingerprint && o.out[n-1].count == 0 {
		o.out[n-1].upper = e.upper // adjacent empty ranges: one "I hold nothing here"
		o.last = e.upper
		return
	}
	if lo.Compare(o.last) > 0 {
		o.out = append(o.out, rangeEntry{upper: lo, mode: modeSkip})
	}
	o.out = append(o.out, e)
	o.last = e.upper
}

func (r *reconciler) fingerprint(lo, hi store.SyncItem) rangeEntry {
	acc := r.view.summary(lo, hi)
	return rangeEntry{upper: hi, mode: modeFingerprint, count: uint64(acc.Count()), fp: wireFingerprint(acc.Fingerprint())}
}

func (r *reconciler) idList(hi store.SyncItem, items []store.SyncItem) rangeEntry {
	ids := make([]shortID, 0, len(items))
	for _, it := range items {
		s := shortOf(it)
		if len(ids) > 0 && ids[len(ids)-1] == s {
			continue // a short-id collision inside one range: list it once
		}
		ids = append(ids, s)
	}
	return rangeEntry{upper: hi, mode: modeIDList, ids: ids}
}

// describe adds the ranges that describe our items of [lo, hi), which hold
// m items: an id list when small, else fingerprints of parts.
func (r *reconciler) describe(o *rangeOut, lo, hi store.SyncItem, m, parts int) {
	if m <= r.p.idList {
		o.add(lo, r.idList(hi, r.view.items(lo, hi)))
		return
	}
	// When one split reaches id-list size, split just that much: the next
	// message is then the id lists, a round trip sooner.
	if need := (m + r.p.idList - 1) / r.p.idList; need <= r.p.maxSplit {
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
func (r *reconciler) cut(o *rangeOut, lo, hi store.SyncItem, cuts []store.SyncItem) store.SyncItem {
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

// initial is the initiator's first turn.
func (r *reconciler) initial() turnPlan {
	var o rangeOut
	lo, hi := store.MinSyncItem, store.MaxSyncItem
	m := r.view.summary(lo, hi).Count()
	switch {
	case m == 0:
		o.add(lo, r.fingerprint(lo, hi))
	case m < r.p.first*r.p.idList:
		// A small set: parts of about id-list size (describe grows parts
		// from 2 to what reaches id lists in one split).
		r.describe(&o, lo, hi, m, 2)
	default:
		r.describe(&o, lo, hi, m, r.p.first)
	}
	return turnPlan{ranges: o.out}
}

// respond processes the peer's ranges and plans the answer.
func (r *reconciler) respond(in []rangeEntry) turnPlan {
	var plan turnPlan
	var o rangeOut
	lo := store.MinSyncItem
	deferred := false
	r.turnSyms = 0
	for _, e := range in {
		hi := e.upper
		switch e.mode {
		case modeFingerprint:
			if deferred {
				break
			}
			acc := r.view.summary(lo, hi)
			m := acc.Count()
			switch {
			case uint64(m) == e.count && wireFingerprint(acc.Fingerprint()) == e.fp:
				// equal
			case e.count == 0: // the peer holds nothing here: stream it all
				if r.push {
					plan.pushRanges = append(plan.pushRanges, pushRange{lo: lo, hi: hi})
				}
			case m == 0: // we hold nothing: say so, the peer streams
				if r.want {
					o.add(lo, r.fingerprint(lo, hi))
				}
			case len(o.out) >= r.p.maxOut:
				// Too much for one turn: describe the rest of the set with one
				// fingerprint; the peer splits it again next turn.
				o.add(lo, r.fingerprint(lo, store.MaxSyncItem))
				deferred = true
			default:
				r.describeOrSketch(&o, lo, hi, m, int(min(e.count, math.MaxInt32)))
			}
		case modeIDList:
			r.resolve(&plan, lo, hi, e.ids)
		case modeSketch:
			if !deferred && len(o.out) >= r.p.maxOut {
				o.add(lo, r.fingerprint(lo, store.MaxSyncItem)) // as for a fingerprint
				deferred = true
			}
			r.answerSketch(&plan, &o, lo, hi, &e, deferred)
		}
		lo = hi
	}
	plan.ranges = o.out
	return plan
}

// resolve compares the peer's id list of [lo, hi) with our items there: we
// then know both differences and settle the range.
func (r *reconciler) resolve(plan *turnPlan, lo, hi store.SyncItem, theirs []shortID) {
	if !r.push && !r.want {
		return
	}
	m := r.view.set.Summary(lo, hi).Count()
	if m > r.p.enumCap {
		// Far more here than the peer: stream ours minus theirs.
		if r.push {
			skip := make(map[shortID]struct{}, len(theirs))
			for _, s := range theirs {
				skip[s] = struct{}{}
			}
			plan.pushRanges = append(plan.pushRanges, pushRange{lo: lo, hi: hi, skip: skip})
		}
		if r.want {
			for _, s := range theirs {
				if !r.view.hasShort(s) {
					plan.wants = append(plan.wants, s)
				}
			}
		}
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
			c = shortOf(mine[i]).compare(theirs[j])
		}
		switch {
		case c < 0: // ours only
			if r.push && !r.view.isExtra(mine[i]) {
				plan.pushItems = append(plan.pushItems, mine[i])
			}
			i++
		case c > 0: // theirs only
			if r.want {
				plan.wants = append(plan.wants, theirs[j])
			}
			j++
		default:
			i++
			j++
		}
	}
}
