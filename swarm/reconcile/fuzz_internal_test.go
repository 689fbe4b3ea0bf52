package reconcile

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm/internal/wire"
)

// FuzzRespond feeds arbitrary RANGES frames to a reconciler: decoding
// refuses garbage, and whatever decodes is answered without panic, with
// ranges that encode and decode again.
func FuzzRespond(f *testing.F) {
	r := rand.New(rand.NewPCG(2, 2))
	set := store.NewSyncSet()
	set.Load(randItems(r, 3000, 1000, 1e6))
	rec := New(set, nil, DefaultParams)
	for _, fr := range EncodeRanges(rec.Initial().Ranges) {
		f.Add(fr)
	}
	sk := rec.sketchEntry(store.MinSyncItem, store.MaxSyncItem, set.Items(store.MinSyncItem, store.MaxSyncItem, 100), 12)
	f.Add(EncodeRanges([]Range{sk})[0])
	f.Add([]byte{wire.Ranges, 1, 0, 1, 0})
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) == 0 || frame[0] != wire.Ranges {
			return
		}
		var rd RangeDecoder
		in, err := rd.Decode(frame)
		if err != nil {
			return
		}
		plan := rec.Respond(in)
		var rd2 RangeDecoder
		for _, fr := range EncodeRanges(plan.Ranges) {
			if _, err := rd2.Decode(fr); err != nil {
				t.Fatalf("own answer does not decode: %v", err)
			}
		}
	})
}

// FuzzRespondRefused is FuzzRespond with refused items in the view, most
// of them where the set holds none of its own: whatever decodes is
// answered without panic, with ranges that encode and decode again and
// that never repeat a range as one fingerprint of itself when it holds
// more than an id list.
func FuzzRespondRefused(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 3))
	set := store.NewSyncSet()
	set.Load(randItems(r, 300, 1000, 1e6))
	extra := randItems(r, 400, 500_000, 200)
	slices.SortFunc(extra, store.SyncItem.Compare)
	extra = slices.CompactFunc(extra, func(a, b store.SyncItem) bool { return a == b })
	rec := New(set, extra, DefaultParams)
	for _, fr := range EncodeRanges(rec.Initial().Ranges) {
		f.Add(fr)
	}
	peer := New(store.NewSyncSet(), extra[:100], DefaultParams)
	for _, fr := range EncodeRanges(peer.Initial().Ranges) {
		f.Add(fr)
	}
	// A peer's fingerprint of the refused burst alone, where we hold none
	// of our own.
	f.Add(EncodeRanges([]Range{
		{Upper: store.SyncItem{TS: 500_000}, Mode: Skip},
		{Upper: store.SyncItem{TS: 500_200}, Mode: Fingerprint, Count: 1},
	})[0])
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) == 0 || frame[0] != wire.Ranges {
			return
		}
		var rd RangeDecoder
		in, err := rd.Decode(frame)
		if err != nil {
			return
		}
		plan := rec.Respond(in)
		var rd2 RangeDecoder
		var out []Range
		for _, fr := range EncodeRanges(plan.Ranges) {
			rs, err := rd2.Decode(fr)
			if err != nil {
				t.Fatalf("own answer does not decode: %v", err)
			}
			out = append(out, rs...)
		}
		// A fingerprint answered with one fingerprint of the very same
		// range, when we hold more than an id list there, is the ping-pong.
		lo := store.MinSyncItem
		inFP := map[[2]store.SyncItem]bool{}
		for _, e := range in {
			if e.Mode == Fingerprint {
				inFP[[2]store.SyncItem{lo, e.Upper}] = true
			}
			lo = e.Upper
		}
		lo = store.MinSyncItem
		for _, e := range out {
			k := [2]store.SyncItem{lo, e.Upper}
			if e.Mode == Fingerprint && e.Count > uint64(rec.p.IDList) && inFP[k] && len(out) < rec.p.MaxOut {
				t.Fatalf("range %v answered with a fingerprint of itself (%d items)", k, e.Count)
			}
			lo = e.Upper
		}
	})
}
