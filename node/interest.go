package node

import (
	"context"
	"fmt"
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
func (n *Node) configureInterest(cfg *swarm.Config) {
	if n.cfg.Replicate == ReplicateInterest {
		cfg.Interest = n.interestCIDs
	}
}

// maxInterest bounds the interest list (a library of a million files is
// far beyond a home's).
const maxInterest = 1 << 20

// interestCIDs lists the cids this node keeps claims about: the peer-id
// cids of the signers it trusts directly (their vouches), its local files'
// cids and every cid it already holds shared claims for (looked-up cids and
// those linked to them included).
func (n *Node) interestCIDs(ctx context.Context) ([]string, error) {
	seen := make(map[string]bool)
	var out []string
	add := func(c string) {
		if c != "" && !seen[c] && len(out) < maxInterest {
			seen[c] = true
			out = append(out, c)
		}
	}
	// The vouches of the signers trusted directly decide whose claims
	// count: fetch them like any cid of interest (a vouch lives on its
	// voucher's peer-id cid).
	trusted, err := n.store.TrustList(ctx)
	if err != nil {
		return nil, fmt.Errorf("interest: %w", err)
	}
	for _, e := range trusted {
		if e.Source == "own" || e.Source == "list" {
			if c, err := store.PeerIDCID(e.UID); err == nil {
				add(c)
			}
		}
	}
	files, err := n.store.LocalFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("interest: %w", err)
	}
	for _, f := range files {
		add(f.CID)
	}
	const page = 4096
	for after := ""; len(out) < maxInterest; {
		cids, err := n.store.CIDs(ctx, after, page)
		if err != nil {
			return nil, fmt.Errorf("interest: %w", err)
		}
		for _, c := range cids {
			add(c)
		}
		if len(cids) < page {
			break
		}
		after = cids[len(cids)-1]
	}
	return out, nil
}

// ErrNotInterested is the result of a peer claim that an interest-mode node
// dropped because it has no record for the claim's cid. It is the swarm's
// sentinel, so the swarm treats such results as neutral (no refusal, no
// penalty).
var ErrNotInterested = swarm.ErrNotInterested

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
		if ok || vouchOnOwnCID(c) {
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

// vouchOnOwnCID: a vouch on its signer's own peer-id cid, the one place a
// vouch counts. A vouch/ key on any other cid is not kept for its key: it
// would make an interest node hold, and follow, any cid a trusted signer
// names.
func vouchOnOwnCID(c *store.Claim) bool {
	if !strings.HasPrefix(c.Key, store.VouchPrefix) {
		return false
	}
	pc, err := store.PeerIDCID(c.UID)
	return err == nil && pc == c.CID
}
