package store

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"sync"
)

// SyncItem is one element of the reconciliation set: a claim's (ts, id).
// Items are ordered by ts, then id bytewise.
type SyncItem struct {
	TS uint64
	ID ID
}

// Compare orders items by (ts, id).
func (a SyncItem) Compare(b SyncItem) int {
	switch {
	case a.TS < b.TS:
		return -1
	case a.TS > b.TS:
		return 1
	}
	return a.ID.Compare(b.ID)
}

// Next returns the least item greater than a.
func (a SyncItem) Next() SyncItem {
	for i := len(a.ID) - 1; i >= 0; i-- {
		a.ID[i]++
		if a.ID[i] != 0 {
			return a
		}
	}
	a.TS++
	return a
}

// MinSyncItem and MaxSyncItem bound the whole set: every item x satisfies
// MinSyncItem <= x < MaxSyncItem (a claim with ts = 2^64-1 is always rejected
// as future-dated, so MaxSyncItem is never an element).
var (
	MinSyncItem = SyncItem{}
	MaxSyncItem = SyncItem{TS: math.MaxUint64, ID: ID{
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
)

// Fingerprint summarises a range of the set (negentropy style).
type Fingerprint [16]byte

// Accumulator is the sum of ids modulo 2^256 (ids read as little-endian
// integers) and their count. Sums make range fingerprints composable: the
// fingerprint of a range is computed from per-block sums without touching
// every item.
type Accumulator struct {
	sum [4]uint64
	n   int
}

// Add adds one id.
func (a *Accumulator) Add(id ID) {
	var c uint64
	for i := range 4 {
		a.sum[i], c = bits.Add64(a.sum[i], binary.LittleEndian.Uint64(id[i*8:]), c)
	}
	a.n++
}

// Sub removes one id.
func (a *Accumulator) Sub(id ID) {
	var b uint64
	for i := range 4 {
		a.sum[i], b = bits.Sub64(a.sum[i], binary.LittleEndian.Uint64(id[i*8:]), b)
	}
	a.n--
}

// Merge adds the ids summed in o.
func (a *Accumulator) Merge(o Accumulator) {
	var c uint64
	for i := range 4 {
		a.sum[i], c = bits.Add64(a.sum[i], o.sum[i], c)
	}
	a.n += o.n
}

// Count returns the number of ids summed.
func (a Accumulator) Count() int { return a.n }

// Fingerprint returns SHA-256(sum as 32 little-endian bytes ‖ uvarint(count)),
// truncated to 16 bytes.
func (a Accumulator) Fingerprint() Fingerprint {
	var buf [32 + binary.MaxVarintLen64]byte
	for i := range 4 {
		binary.LittleEndian.PutUint64(buf[i*8:], a.sum[i])
	}
	n := binary.PutUvarint(buf[32:], uint64(a.n))
	h := sha256.Sum256(buf[:32+n])
	var fp Fingerprint
	copy(fp[:], h[:16])
	return fp
}

// SyncSet is the ordered set of (ts, id) of the claims a node shares, kept in
// memory in sorted blocks with per-block sums. A range fingerprint costs
// O(blocks + block size), so a reconciliation never scans the claim table.
// It is safe for concurrent use: the store's writer changes it after each
// commit; sync sessions read it.
type SyncSet struct {
	mu     sync.RWMutex
	blocks []*syncBlock
	n      int
}

type syncBlock struct {
	items []SyncItem
	acc   Accumulator
}

const (
	syncBlockMax  = 1024
	syncBlockFill = 768 // bulk loads leave room for inserts
)

// NewSyncSet returns an empty set.
func NewSyncSet() *SyncSet { return &SyncSet{} }

// Len returns the number of items.
func (s *SyncSet) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.n
}

// Load replaces the content of the set with items (in any order; duplicates
// are dropped).
func (s *SyncSet) Load(items []SyncItem) {
	items = slices.Clone(items)
	slices.SortFunc(items, SyncItem.Compare)
	items = slices.Compact(items)
	var blocks []*syncBlock
	for lo := 0; lo < len(items); lo += syncBlockFill {
		blocks = append(blocks, newSyncBlock(slices.Clone(items[lo:min(lo+syncBlockFill, len(items))])))
	}
	s.mu.Lock()
	s.blocks, s.n = blocks, len(items)
	s.mu.Unlock()
}

func newSyncBlock(items []SyncItem) *syncBlock {
	b := &syncBlock{items: items}
	for _, it := range items {
		b.acc.Add(it.ID)
	}
	return b
}

// locate returns the position of the first item >= x: block index and index
// within the block. A position past the end is (len(blocks), 0).
func (s *SyncSet) locate(x SyncItem) (int, int) {
	bi, _ := slices.BinarySearchFunc(s.blocks, x, func(b *syncBlock, x SyncItem) int {
		return b.items[len(b.items)-1].Compare(x)
	})
	if bi == len(s.blocks) {
		return bi, 0
	}
	ii, _ := slices.BinarySearchFunc(s.blocks[bi].items, x, SyncItem.Compare)
	return bi, ii
}

// Has reports whether x is in the set.
func (s *SyncSet) Has(x SyncItem) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	bi, ii := s.locate(x)
	return bi < len(s.blocks) && s.blocks[bi].items[ii] == x
}

// Add inserts x and reports whether it was new.
func (s *SyncSet) Add(x SyncItem) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.blocks) == 0 {
		s.blocks = []*syncBlock{newSyncBlock([]SyncItem{x})}
		s.n = 1
		return true
	}
	bi, ii := s.locate(x)
	if bi == len(s.blocks) { // after every item: append to the last block
		bi = len(s.blocks) - 1
		ii = len(s.blocks[bi].items)
	} else if s.blocks[bi].items[ii] == x {
		return false
	}
	b := s.blocks[bi]
	if len(b.items) == cap(b.items) {
		// Grow by an eighth, not by doubling: at a million items the blocks
		// are most of the store's heap, and a block never exceeds syncBlockMax+1.
		grown := make([]SyncItem, len(b.items), min(syncBlockMax+1, cap(b.items)+cap(b.items)/8+16))
		copy(grown, b.items)
		b.items = grown
	}
	b.items = slices.Insert(b.items, ii, x)
	b.acc.Add(x.ID)
	s.n++
	if len(b.items) > syncBlockMax {
		half := len(b.items) / 2
		left := newSyncBlock(slices.Clone(b.items[:half]))
		right := newSyncBlock(slices.Clone(b.items[half:]))
		s.blocks[bi] = left
		s.blocks = slices.Insert(s.blocks, bi+1, right)
	}
	return true
}

// Remove deletes x and reports whether it was present.
func (s *SyncSet) Remove(x SyncItem) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	bi, ii := s.locate(x)
	if bi == len(s.blocks) || s.blocks[bi].items[ii] != x {
		return false
	}
	b := s.blocks[bi]
	b.items = slices.Delete(b.items, ii, ii+1)
	b.acc.Sub(x.ID)
	s.n--
	if len(b.items) == 0 {
		s.blocks = slices.Delete(s.blocks, bi, bi+1)
	}
	return true
}

// Summary returns the accumulator of the items in [lo, hi).
func (s *SyncSet) Summary(lo, hi SyncItem) Accumulator {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var acc Accumulator
	if lo.Compare(hi) >= 0 {
		return acc
	}
	b1, i1 := s.locate(lo)
	b2, i2 := s.locate(hi)
	if b1 == b2 {
		if b1 < len(s.blocks) {
			addRange(&acc, s.blocks[b1], i1, i2)
		}
		return acc
	}
	addRange(&acc, s.blocks[b1], i1, len(s.blocks[b1].items))
	for _, b := range s.blocks[b1+1 : b2] {
		acc.Merge(b.acc)
	}
	if b2 < len(s.blocks) {
		addRange(&acc, s.blocks[b2], 0, i2)
	}
	return acc
}

// addRange adds items [i, j) of b to acc, from whichever side is shorter.
func addRange(acc *Accumulator, b *syncBlock, i, j int) {
	if j-i > len(b.items)/2 {
		acc.Merge(b.acc)
		for _, it := range b.items[:i] {
			acc.Sub(it.ID)
		}
		for _, it := range b.items[j:] {
			acc.Sub(it.ID)
		}
		return
	}
	for _, it := range b.items[i:j] {
		acc.Add(it.ID)
	}
}

// Items returns up to limit items of [lo, hi) in order (all when limit <= 0).
func (s *SyncSet) Items(lo, hi SyncItem, limit int) []SyncItem {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []SyncItem
	if lo.Compare(hi) >= 0 {
		return out
	}
	bi, ii := s.locate(lo)
	for ; bi < len(s.blocks); bi, ii = bi+1, 0 {
		for _, it := range s.blocks[bi].items[ii:] {
			if it.Compare(hi) >= 0 || (limit > 0 && len(out) == limit) {
				return out
			}
			out = append(out, it)
		}
	}
	return out
}

// Split returns up to parts-1 boundaries that cut the items of [lo, hi) into
// parts runs of near-equal size; each boundary is the first item of a run.
// A range with fewer than parts items yields one boundary per item after the
// first.
func (s *SyncSet) Split(lo, hi SyncItem, parts int) []SyncItem {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if parts < 2 || lo.Compare(hi) >= 0 {
		return nil
	}
	b1, i1 := s.locate(lo)
	b2, i2 := s.locate(hi)
	count := 0
	for bi := b1; bi <= b2 && bi < len(s.blocks); bi++ {
		from, to := 0, len(s.blocks[bi].items)
		if bi == b1 {
			from = i1
		}
		if bi == b2 {
			to = i2
		}
		count += to - from
	}
	parts = min(parts, count)
	var out []SyncItem
	bi, ii := b1, i1
	pos := 0 // items skipped so far
	for k := 1; k < parts; k++ {
		target := k * count / parts
		for pos+(len(s.blocks[bi].items)-ii) <= target {
			pos += len(s.blocks[bi].items) - ii
			bi, ii = bi+1, 0
		}
		ii += target - pos
		pos = target
		out = append(out, s.blocks[bi].items[ii])
	}
	return out
}

// BlockUsage returns the number of items and of allocated item slots, to
// keep the set's memory honest in tests and benchmarks.
func (s *SyncSet) BlockUsage() (items, slots int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, b := range s.blocks {
		items += len(b.items)
		slots += cap(b.items)
	}
	return items, slots
}
