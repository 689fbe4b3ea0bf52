package store_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/metanode/metanode/store"
)

func randItem(r *rand.Rand) store.SyncItem {
	var it store.SyncItem
	it.TS = uint64(r.IntN(500))
	for i := range it.ID {
		it.ID[i] = byte(r.Uint32())
	}
	return it
}

// TestSyncSet_MatchesModel drives the set and a sorted slice with the same
// random operations and compares every query.
func TestSyncSet_MatchesModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	s := store.NewSyncSet()
	var model []store.SyncItem
	initial := make([]store.SyncItem, 3000)
	for i := range initial {
		initial[i] = randItem(r)
	}
	s.Load(append(initial, initial[:10]...)) // duplicates are dropped
	model = slices.Clone(initial)
	slices.SortFunc(model, store.SyncItem.Compare)
	model = slices.Compact(model)

	for step := range 6000 {
		switch op := r.IntN(10); {
		case op < 6:
			it := randItem(r)
			if step%7 == 0 && len(model) > 0 {
				it = model[r.IntN(len(model))] // re-adding a present item
			}
			i, found := slices.BinarySearchFunc(model, it, store.SyncItem.Compare)
			if got := s.Add(it); got == found {
				t.Fatalf("step %d: Add returned %v for found=%v", step, got, found)
			}
			if !found {
				model = slices.Insert(model, i, it)
			}
		case op < 9 && len(model) > 0:
			it := model[r.IntN(len(model))]
			if !s.Remove(it) {
				t.Fatalf("step %d: Remove of present item returned false", step)
			}
			i, _ := slices.BinarySearchFunc(model, it, store.SyncItem.Compare)
			model = slices.Delete(model, i, i+1)
		default:
			if s.Remove(randItem(r)) {
				t.Fatalf("step %d: Remove of absent item returned true", step)
			}
		}
		if step%200 == 0 {
			checkQueries(t, r, s, model)
		}
	}
	checkQueries(t, r, s, model)
}

func checkQueries(t *testing.T, r *rand.Rand, s *store.SyncSet, model []store.SyncItem) {
	t.Helper()
	if s.Len() != len(model) {
		t.Fatalf("Len=%d, want %d", s.Len(), len(model))
	}
	if got := s.Items(store.MinSyncItem, store.MaxSyncItem, 0); !slices.Equal(got, model) {
		t.Fatalf("Items differ from model (%d vs %d)", len(got), len(model))
	}
	for range 20 {
		lo, hi := randItem(r), randItem(r)
		if r.IntN(5) == 0 {
			lo = store.MinSyncItem
		}
		if r.IntN(5) == 0 {
			hi = store.MaxSyncItem
		}
		var want store.Accumulator
		var inRange []store.SyncItem
		for _, it := range model {
			if it.Compare(lo) >= 0 && it.Compare(hi) < 0 {
				want.Add(it.ID)
				inRange = append(inRange, it)
			}
		}
		got := s.Summary(lo, hi)
		if got.Count() != want.Count() || got.Fingerprint() != want.Fingerprint() {
			t.Fatalf("Summary count=%d fp=%x, want %d %x", got.Count(), got.Fingerprint(), want.Count(), want.Fingerprint())
		}
		if items := s.Items(lo, hi, 7); !slices.Equal(items, inRange[:min(7, len(inRange))]) {
			t.Fatalf("Items with limit differ")
		}
		parts := 2 + r.IntN(16)
		bounds := s.Split(lo, hi, parts)
		if want := min(parts, len(inRange)) - 1; len(inRange) > 0 && len(bounds) != want {
			t.Fatalf("Split into %d gave %d bounds for %d items", parts, len(bounds), len(inRange))
		}
		// Buckets cover the range exactly and are near-equal.
		edges := append(append([]store.SyncItem{lo}, bounds...), hi)
		total := 0
		for i := 0; i+1 < len(edges); i++ {
			n := s.Summary(edges[i], edges[i+1]).Count()
			if len(bounds) > 0 && (n < len(inRange)/len(edges)-1 || n == 0) {
				t.Fatalf("bucket %d has %d of %d items", i, n, len(inRange))
			}
			total += n
		}
		if total != len(inRange) {
			t.Fatalf("buckets hold %d items, want %d", total, len(inRange))
		}
	}
}

func TestAccumulator_FingerprintOfEmpty(t *testing.T) {
	var a, b store.Accumulator
	if a.Fingerprint() != b.Fingerprint() {
		t.Fatal("empty fingerprints differ")
	}
	var id store.ID
	id[0] = 1
	a.Add(id)
	if a.Fingerprint() == b.Fingerprint() {
		t.Fatal("adding an id did not change the fingerprint")
	}
	a.Sub(id)
	if a.Fingerprint() != b.Fingerprint() {
		t.Fatal("add then sub is not the identity")
	}
}

func BenchmarkSyncSet_Summary1M(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	items := make([]store.SyncItem, 1_000_000)
	for i := range items {
		items[i] = randItem(r)
		items[i].TS = uint64(r.IntN(1 << 40))
	}
	s := store.NewSyncSet()
	s.Load(items)
	b.ResetTimer()
	for b.Loop() {
		s.Summary(store.MinSyncItem, store.MaxSyncItem)
	}
}

// TestSyncSet_BlockCapacityBounded checks inserts never leave a block with
// more than a little spare room (blocks are most of the heap at 1M claims).
func TestSyncSet_BlockCapacityBounded(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	items := make([]store.SyncItem, 20_000)
	for i := range items {
		items[i] = randItem(r)
	}
	s := store.NewSyncSet()
	s.Load(items)
	for range 20_000 {
		s.Add(randItem(r))
	}
	length, capacity := s.BlockUsage()
	if capacity > length+length/4+16*len(items)/768 {
		t.Fatalf("blocks hold %d items in %d slots", length, capacity)
	}
}
