package swarm

import (
	"math"
	"sort"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/metanode/metanode/store"
)

// The in-flight registry keeps concurrent sessions of one node from asking
// two peers for the same claims at once. Sessions with several full peers
// run together (a new connection, a trust change, the periodic round, the
// cascade); without it a node back from an absence received each missing
// claim once per such peer, and a cold node the whole set once per full
// peer.
//
// Before a turn goes out, the session registers the spans of (ts, id) the
// turn makes its peer send: each WANT's short id, each range it answers
// with "I hold nothing here" (a Fingerprint of count 0: the peer streams
// it), each IdList and Sketch of its own items (the peer pushes what they
// lack). A span another live session registered is not asked for again: a
// count-0 range is cut around it, a WANT over it is dropped, an IdList or
// Sketch over it becomes a Skip. Nothing new goes on the wire (Skip is an
// ordinary range mode). The spans are released when the session ends,
// after what it received is stored. A session that deferred to others is
// run again with its peer once all of those have ended (the scheduler
// reads ready), so what they did not bring (their peer failed, was closed,
// or lacked some of it) is asked for then. A peer that holds its sessions
// open delays that by at most maxDeferAge: a session older than that is
// not deferred to, and peers waiting for it are run again (expire, from
// the scheduler's tick); and by at most maxDeferRounds waits in a row:
// past that, sessions with the waiting peer ask regardless.
//
// Bounded: at most maxFlightSpans spans (past it a session asks without
// registering, as before), waiting entries only for peers whose sessions
// deferred to live ones, deferral counts for at most maxDeferPeers peers.
// One mutex, never held across I/O; the work per turn is linear in the
// turn's ranges and wants plus the registry's size.

const (
	maxFlightSpans = 1 << 18 // about 23 MB at most
	maxDeferRounds = 3       // consecutive waits before a peer's sessions ask anyway
	maxDeferPeers  = 4096
	// maxDeferAge: sessions are deferred to only for a session's base
	// lifetime (guard.go). One that lives longer has bought time by its
	// work (1 s per 64 KiB), which a peer can do slowly on purpose, up to
	// sessionTimeout (30 min); what it was asked for is then asked of
	// other peers too. An honest session moves a million claims within it
	// here (docs/benchmarks.md, cold catch-up); on a slower machine the
	// rest of a longer one may come twice.
	maxDeferAge = sessionBase
)

// flight is what one session asked its peer for. Guarded by inflight.mu.
type flight struct {
	peer     peer.ID
	began    time.Time
	mayDefer bool             // skip what others ask for; else only register
	holders  map[*flight]bool // the sessions this one deferred to
	skipped  int64            // wants dropped and ranges skipped for them
	done     bool             // ended: its spans are released
}

// span is a range of (ts, id) a flight asked its peer for: [lo, hi).
type span struct {
	lo, hi store.SyncItem
	f      *flight
}

// inflight is one swarm's registry.
type inflight struct {
	mu      sync.Mutex
	spans   []span                       // sorted, disjoint
	waiting map[peer.ID]map[*flight]bool // peer → live flights its last sessions deferred to
	ready   []peer.ID                    // peers to sync with again: what they waited for ended
	defers  map[peer.ID]int              // consecutive waits per peer
	wake    chan struct{}                // cap 1: ready grew
}

func newInflight() *inflight {
	return &inflight{
		waiting: map[peer.ID]map[*flight]bool{},
		defers:  map[peer.ID]int{},
		wake:    make(chan struct{}, 1),
	}
}

// begin starts a session's flight. mayDefer: the session may leave to
// other sessions what they ask for (only sessions someone runs again
// later: the scheduler's and inbound ones, not SyncWith's).
func (r *inflight) begin(p peer.ID, mayDefer bool) *flight {
	f := &flight{peer: p, began: time.Now()}
	if r == nil {
		return f
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n, counted := r.defers[p]
	f.mayDefer = mayDefer && n < maxDeferRounds && (counted || len(r.defers) < maxDeferPeers)
	return f
}

// claim registers what plan asks the peer to send and, when f may defer,
// takes out of plan what other live sessions ask for already: wants are
// dropped, count-0 ranges cut around their spans, id lists and sketches
// over them skipped. plan.wants must be sorted and compact.
func (r *inflight) claim(f *flight, plan *turnPlan) {
	if r == nil || f == nil || f.done {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var add []span
	kept := plan.wants[:0]
	for _, w := range plan.wants {
		lo, hi := w.span()
		if f.mayDefer && r.deferTo(f, lo, hi) {
			continue
		}
		kept = append(kept, w)
		add = r.gaps(f, add, lo, hi)
	}
	plan.wants = kept

	out := make([]rangeEntry, 0, len(plan.ranges))
	lo := store.MinSyncItem
	for _, e := range plan.ranges {
		hi := e.upper
		switch {
		case !asksPeer(&e):
			out = append(out, e)
		case e.mode == modeFingerprint && f.mayDefer:
			out, add = r.cutEmpty(f, out, add, lo, e)
		case f.mayDefer && r.deferTo(f, lo, hi):
			out = append(out, rangeEntry{upper: hi, mode: modeSkip})
		default:
			out = append(out, e)
			add = r.gaps(f, add, lo, hi)
		}
		lo = hi
	}
	plan.ranges = compactSkips(out)
	r.insert(add)
}

// asksPeer reports whether a range of ours makes the peer send claims:
// "I hold nothing here" (it streams the range), or our items listed or
// sketched (it pushes what we lack).
func asksPeer(e *rangeEntry) bool {
	switch e.mode {
	case modeFingerprint:
		return e.count == 0
	case modeIDList, modeSketch:
		return true
	}
	return false
}

// deferTo reports whether other flights' spans overlap [lo, hi) and, if
// so, records them as f's holders.
func (r *inflight) deferTo(f *flight, lo, hi store.SyncItem) bool {
	found := false
	now := time.Now()
	for i := r.first(lo); i < len(r.spans) && r.spans[i].lo.Compare(hi) < 0; i++ {
		if o := r.spans[i].f; o != f && !o.old(now) {
			f.hold(o)
			found = true
		}
	}
	if found {
		f.skipped++
	}
	return found
}

// old reports whether the flight began more than maxDeferAge before now:
// it is no longer deferred to.
func (f *flight) old(now time.Time) bool { return now.Sub(f.began) > maxDeferAge }

func (f *flight) hold(o *flight) {
	if f.holders == nil {
		f.holders = map[*flight]bool{}
	}
	f.holders[o] = true
}

// cutEmpty adds a count-0 range [lo, e.upper) to out minus other flights'
// spans, which become Skips: we hold nothing anywhere in it, so each piece
// is count 0 too.
func (r *inflight) cutEmpty(f *flight, out []rangeEntry, add []span, lo store.SyncItem, e rangeEntry) ([]rangeEntry, []span) {
	hi := e.upper
	cur := lo
	now := time.Now()
	for i := r.first(lo); i < len(r.spans) && r.spans[i].lo.Compare(hi) < 0; i++ {
		sp := r.spans[i]
		if sp.f == f || sp.f.old(now) {
			continue
		}
		a, b := maxItem(sp.lo, lo), minItem(sp.hi, hi)
		if cur.Compare(a) < 0 {
			out = append(out, rangeEntry{upper: a, mode: modeFingerprint, fp: e.fp})
			add = r.gaps(f, add, cur, a)
		}
		out = append(out, rangeEntry{upper: b, mode: modeSkip})
		f.hold(sp.f)
		f.skipped++
		cur = b
	}
	if cur.Compare(hi) < 0 {
		out = append(out, rangeEntry{upper: hi, mode: modeFingerprint, fp: e.fp})
		add = r.gaps(f, add, cur, hi)
	}
	return out, add
}

// first returns the index of the first span that ends after lo.
func (r *inflight) first(lo store.SyncItem) int {
	return sort.Search(len(r.spans), func(i int) bool { return r.spans[i].hi.Compare(lo) > 0 })
}

// gaps appends to add the parts of [lo, hi) no span covers, as f's.
// Bounds of ts MaxUint64 are registered as the end of the set: no claim
// has that ts (the store refuses future ones), and a turn cannot start
// with such a bound (its ts delta from 0 wraps to the end-of-set marker),
// which a cut at the span of a peer's listed id would make it do.
func (r *inflight) gaps(f *flight, add []span, lo, hi store.SyncItem) []span {
	lo, hi = endAtMaxTS(lo), endAtMaxTS(hi)
	cur := lo
	for i := r.first(lo); i < len(r.spans) && r.spans[i].lo.Compare(hi) < 0; i++ {
		if sp := r.spans[i]; cur.Compare(sp.lo) < 0 {
			add = append(add, span{lo: cur, hi: sp.lo, f: f})
			cur = sp.hi
		} else {
			cur = maxItem(cur, sp.hi)
		}
	}
	if cur.Compare(hi) < 0 {
		add = append(add, span{lo: cur, hi: hi, f: f})
	}
	return add
}

// insert merges f's new spans (disjoint from the registry's, maybe
// overlapping each other) into the registry, within maxFlightSpans.
func (r *inflight) insert(add []span) {
	if len(add) == 0 {
		return
	}
	sort.Slice(add, func(i, j int) bool { return add[i].lo.Compare(add[j].lo) < 0 })
	u := add[:1]
	for _, s := range add[1:] { // union: one flight's spans may touch or overlap
		if last := &u[len(u)-1]; s.lo.Compare(last.hi) <= 0 {
			last.hi = maxItem(last.hi, s.hi)
			continue
		}
		u = append(u, s)
	}
	u = u[:min(len(u), maxFlightSpans-len(r.spans))]
	if len(u) == 0 {
		return
	}
	merged := make([]span, 0, len(r.spans)+len(u))
	i, j := 0, 0
	for i < len(r.spans) || j < len(u) {
		if j == len(u) || (i < len(r.spans) && r.spans[i].lo.Compare(u[j].lo) < 0) {
			merged = append(merged, r.spans[i])
			i++
		} else {
			merged = append(merged, u[j])
			j++
		}
	}
	r.spans = merged
}

// end releases f's spans when its session has ended and what it received
// is stored. Peers that waited only for f become ready; if f deferred to
// sessions still running, its peer waits for them. It returns how much f
// left to others.
func (r *inflight) end(f *flight) int64 {
	if r == nil || f == nil || f.done {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f.done = true
	kept := r.spans[:0]
	for _, s := range r.spans {
		if s.f != f {
			kept = append(kept, s)
		}
	}
	clear(r.spans[len(kept):]) // drop the flights' pointers
	r.spans = kept
	for p, hs := range r.waiting {
		if hs[f] {
			delete(hs, f)
			if len(hs) == 0 {
				delete(r.waiting, p)
				r.makeReady(p)
			}
		}
	}
	if f.skipped == 0 {
		delete(r.defers, f.peer) // it asked for all it lacked
		return 0
	}
	hs := r.waiting[f.peer]
	for o := range f.holders {
		if !o.done {
			if hs == nil {
				hs = map[*flight]bool{}
				r.waiting[f.peer] = hs
			}
			hs[o] = true
		}
	}
	if hs == nil {
		r.makeReady(f.peer)
	}
	return f.skipped
}

// expire runs again the peers that wait only for sessions older than
// maxDeferAge (their deferral would otherwise last until those sessions
// time out); waits for younger sessions go on. The scheduler calls it
// on its tick.
func (r *inflight) expire(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, hs := range r.waiting {
		for o := range hs {
			if o.old(now) {
				delete(hs, o)
			}
		}
		if len(hs) == 0 {
			delete(r.waiting, p)
			r.makeReady(p)
		}
	}
}

func (r *inflight) makeReady(p peer.ID) {
	// Full: a new peer is not counted (begin lets it ask regardless);
	// clearing would give every waiting peer maxDeferRounds more waits.
	if _, ok := r.defers[p]; ok || len(r.defers) < maxDeferPeers {
		r.defers[p]++
	}
	for _, q := range r.ready {
		if q == p {
			return
		}
	}
	r.ready = append(r.ready, p)
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// takeReady returns the peers to sync with again and forgets them.
func (r *inflight) takeReady() []peer.ID {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.ready
	r.ready = nil
	return out
}

// compactSkips merges neighbouring Skips and drops trailing ones (a turn
// whose ranges are all skipped describes nothing, and is final when it
// wants nothing either).
func compactSkips(in []rangeEntry) []rangeEntry {
	out := in[:0]
	for _, e := range in {
		if n := len(out); n > 0 && e.mode == modeSkip && out[n-1].mode == modeSkip {
			out[n-1].upper = e.upper
			continue
		}
		out = append(out, e)
	}
	for len(out) > 0 && out[len(out)-1].mode == modeSkip {
		out = out[:len(out)-1]
	}
	return out
}

func endAtMaxTS(it store.SyncItem) store.SyncItem {
	if it.TS == math.MaxUint64 {
		return store.MaxSyncItem
	}
	return it
}

func maxItem(a, b store.SyncItem) store.SyncItem {
	if a.Compare(b) >= 0 {
		return a
	}
	return b
}

func minItem(a, b store.SyncItem) store.SyncItem {
	if a.Compare(b) <= 0 {
		return a
	}
	return b
}

// flights returns the swarm's registry; nil (no deduplication) outside
// the sync scheduler's lifetime.
func (s *Swarm) flights() *inflight { return s.inflight.Load() }
