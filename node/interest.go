package node

import (
	"context"
	"errors"
	"strings"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

// swarmStore is what the swarm stores peer claims through: the store itself,
// or in interest mode a filter in front of it.
func (n *Node) swarmStore() swarm.Store {
	if n.cfg.Replicate == ReplicateInterest {
		return &interestStore{Store: n.store}
	}
	return n.store
}

// configureInterest tells the swarm which cids to fetch on its own in
// interest mode.
func (n *Node) configureInterest(cfg *swarm.Config) {}

// ErrNotInterested is the result of a peer claim that an interest-mode node
// dropped because it has no record for the claim's cid.
var ErrNotInterested = errors.New("not of interest: this node keeps claims about its own cids only")

// interestStore drops peer claims about cids this node has no record for.
// Vouches are kept: they decide whose claims count, whatever the cid.
type interestStore struct {
	*store.Store
}

func (s *interestStore) Submit(ctx context.Context, claims []store.Claim, opt store.SubmitOptions) ([]store.Result, error) {
	if opt.Origin != store.OriginPeer { // a lookup's fetch was asked for
		return s.Store.Submit(ctx, claims, opt)
	}
	keep := make([]store.Claim, 0, len(claims))
	idx := make([]int, 0, len(claims))
	known := make(map[string]bool)
	for i := range claims {
		c := &claims[i]
		ok, seen := known[c.CID]
		if !seen {
			has, err := s.HasCID(ctx, c.CID)
			if err != nil {
				return nil, err
			}
			ok = has
			known[c.CID] = ok
		}
		if ok || strings.HasPrefix(c.Key, store.VouchPrefix) {
			keep = append(keep, *c)
			idx = append(idx, i)
		}
	}
	res := make([]store.Result, len(claims))
	for i := range claims {
		res[i] = store.Result{ID: claims[i].ID(), Outcome: store.Rejected, Err: ErrNotInterested}
	}
	if len(keep) == 0 {
		return res, nil
	}
	kept, err := s.Store.Submit(ctx, keep, opt)
	if err != nil {
		return nil, err
	}
	for j, i := range idx {
		res[i] = kept[j]
	}
	return res, nil
}
