package reconcile_test

import (
	"slices"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm/internal/wire"
	"github.com/metanode/metanode/swarm/reconcile"
)

// maxTurns is the sync session's turn limit (swarm/sync.go).
const maxTurns = 64

// simSide is one side of a simulated session: a real SyncSet whose items
// stand for claims, and its reconciler.
type simSide struct {
	rec *reconcile.Reconciler
	set *store.SyncSet
}

func newSimSide(items, refused []store.SyncItem, p reconcile.Params) *simSide {
	set := store.NewSyncSet()
	set.Load(items)
	slices.SortFunc(refused, store.SyncItem.Compare)
	rec := reconcile.New(set, refused, p)
	rec.Sketch = true
	return &simSide{set: set, rec: rec}
}

type simResult struct {
	turns    int
	overhead int // bytes of RANGES and WANT frames with their length prefixes
	moved    int // items transferred (claims in a real session)
	sketches int // sketch ranges sent
}

// transfer returns the items x sends in a turn: what the peer asked for,
// what x found the peer lacks, and whole ranges.
func (x *simSide) transfer(plan reconcile.Plan, peerWants []reconcile.ShortID) []store.SyncItem {
	if !x.rec.Push {
		return nil
	}
	out := slices.Clone(plan.PushItems)
	for _, s := range peerWants {
		lo, hi := s.Span()
		out = append(out, x.set.Items(lo, hi, 0)...)
	}
	for _, pr := range plan.PushRanges {
		for _, it := range x.set.Items(pr.Lo, pr.Hi, 0) {
			if _, skip := pr.Skip[reconcile.ShortOf(it)]; !skip {
				out = append(out, it)
			}
		}
	}
	return out
}

// wireTurn encodes a plan's ranges and wants as frames and decodes them as
// the peer would, counting bytes.
func wireTurn(t testing.TB, plan reconcile.Plan, res *simResult) ([]reconcile.Range, []reconcile.ShortID) {
	t.Helper()
	var rd reconcile.RangeDecoder
	var got []reconcile.Range
	for _, f := range reconcile.EncodeRanges(plan.Ranges) {
		res.overhead += len(f) + wire.UvarintLen(uint64(len(f)))
		rs, err := rd.Decode(f)
		if err != nil {
			t.Fatalf("decode own ranges: %v", err)
		}
		got = append(got, rs...)
	}
	for _, e := range got {
		if e.Mode == reconcile.Sketch {
			res.sketches++
		}
	}
	wants := reconcile.CompactWants(slices.Clone(plan.Wants))
	var gotWants []reconcile.ShortID
	for chunk := range slices.Chunk(wants, reconcile.MaxWantPerFrame) {
		f := reconcile.AppendWant(nil, chunk)
		res.overhead += len(f) + wire.UvarintLen(uint64(len(f)))
		w, err := reconcile.DecodeWant(f)
		if err != nil {
			t.Fatalf("decode own wants: %v", err)
		}
		gotWants = append(gotWants, w...)
	}
	res.overhead += 2 // END
	return got, gotWants
}

// simulate runs a whole session between a (initiator) and b as the stream
// code does, moving items instead of claims.
func simulate(t testing.TB, a, b *simSide) simResult {
	t.Helper()
	var res simResult
	res.overhead += 8 // HELLO
	ranges, wants := wireTurn(t, a.rec.Initial(), &res)
	res.turns = 1
	from, to := a, b
	helloPending := true // the responder's first turn always goes out
	var inbound []store.SyncItem
	for {
		for _, it := range inbound {
			to.set.Add(it)
		}
		res.moved += len(inbound)
		if len(ranges) == 0 && len(wants) == 0 && !helloPending {
			return res
		}
		helloPending = false
		plan := to.rec.Respond(ranges)
		inbound = to.transfer(plan, wants)
		ranges, wants = wireTurn(t, plan, &res)
		res.turns++
		if res.turns > maxTurns {
			t.Fatalf("no end after %d turns", res.turns)
		}
		from, to = to, from
		if plan.Final() {
			for _, it := range inbound {
				to.set.Add(it)
			}
			res.moved += len(inbound)
			return res
		}
	}
}

func sameSets(t testing.TB, a, b *store.SyncSet) {
	t.Helper()
	sa := a.Summary(store.MinSyncItem, store.MaxSyncItem)
	sb := b.Summary(store.MinSyncItem, store.MaxSyncItem)
	if sa.Count() != sb.Count() || sa.Fingerprint() != sb.Fingerprint() {
		t.Fatalf("sets differ after sync: %d vs %d items", sa.Count(), sb.Count())
	}
}

func everyOther(items []store.SyncItem) []store.SyncItem {
	var out []store.SyncItem
	for i := 0; i < len(items); i += 2 {
		out = append(out, items[i])
	}
	return out
}
