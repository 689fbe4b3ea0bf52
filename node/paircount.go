package node

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/metanode/metanode/store"
)

// The claim count a pairing answers (the joiner's "syncing n of m") is the
// share of this node's claims the joiner will accept: it trusts this node's
// uid and, through its live vouches, the signers it vouches for (one hop),
// nobody else. Reading claims to learn their signers costs tens of µs each,
// so the count is exact up to pairCountExact shared claims and beyond that
// estimated from a stratified random sample of pairCountSample claims (a
// few per cent off at most, once per pairing). Variables: tests lower them.
var (
	pairCountExact  = 16384
	pairCountSample = 2048
)

// pairCountTime bounds the count inside the pairing answer (the joiner
// waits 20 s for it).
const pairCountTime = 10 * time.Second

// joinerShare counts (or estimates) the shared claims a paired home will
// accept from this node.
func (n *Node) joinerShare(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, pairCountTime)
	defer cancel()
	ours, err := n.vouchedSigners(ctx)
	if err != nil {
		return 0, err
	}
	ss := n.store.SyncSet()
	if ss.Len() <= pairCountExact {
		return n.countSigned(ctx, ours)
	}
	bounds := ss.Split(store.MinSyncItem, store.MaxSyncItem, pairCountSample)
	bounds = append(append([]store.SyncItem{store.MinSyncItem}, bounds...), store.MaxSyncItem)
	sample := make([]store.SyncItem, 0, len(bounds))
	for i := 0; i+1 < len(bounds); i++ {
		if items := ss.Items(bounds[i], bounds[i+1], 0); len(items) > 0 {
			sample = append(sample, items[rand.IntN(len(items))])
		}
	}
	claims, err := n.store.ClaimsByItems(ctx, sample)
	if err != nil || len(claims) == 0 {
		return 0, err
	}
	hits := 0
	for i := range claims {
		if ours[claims[i].UID] {
			hits++
		}
	}
	return int64(float64(ss.Len())*float64(hits)/float64(len(claims)) + 0.5), nil
}

// vouchedSigners is this node's uid and the uids it vouches for (live,
// not distrusted).
func (n *Node) vouchedSigners(ctx context.Context) (map[string]bool, error) {
	own := n.identity.UID()
	out := map[string]bool{own: true}
	if n.store.TrustMode() != store.TrustList {
		return out, nil
	}
	list, err := n.store.TrustList(ctx)
	if err != nil {
		return nil, fmt.Errorf("pairing count: %w", err)
	}
	for _, e := range list {
		if slices.Contains(e.VouchedBy, own) {
			out[e.UID] = true
		}
	}
	return out, nil
}

// countSigned counts the shared claims signed by one of uids, reading
// them page by page in (ts, id) order.
func (n *Node) countSigned(ctx context.Context, uids map[string]bool) (int64, error) {
	const page = 4096
	var count int64
	for lo := store.MinSyncItem; ; {
		claims, err := n.store.ClaimsInRange(ctx, lo, store.MaxSyncItem, page)
		if err != nil {
			return 0, fmt.Errorf("pairing count: %w", err)
		}
		for i := range claims {
			if uids[claims[i].UID] {
				count++
			}
		}
		if len(claims) < page {
			return count, nil
		}
		last := claims[len(claims)-1]
		lo = after(store.SyncItem{TS: last.TS, ID: last.ID()})
	}
}

// after is the smallest item greater than it.
func after(it store.SyncItem) store.SyncItem {
	for i := len(it.ID) - 1; i >= 0; i-- {
		if it.ID[i]++; it.ID[i] != 0 {
			return it
		}
	}
	it.TS++
	return it
}
