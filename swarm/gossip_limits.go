package swarm

import (
	"context"
	"sync"
	"time"

	"github.com/metanode/metanode/store"
)

// dropStale moves out of fresh the claims the store holds the same or a
// newer row for and returns them (with their ids). On a store error it
// keeps them all: the store judges them again when they are submitted.
func (s *Swarm) dropStale(ctx context.Context, fresh *[]store.Claim, ids *[]store.ID) ([]store.Claim, []store.ID) {
	if len(*fresh) == 0 {
		return nil, nil
	}
	old, err := s.cfg.Store.Superseded(ctx, *fresh, *ids)
	if err != nil {
		if ctx.Err() == nil && s.ctx.Err() == nil {
			s.log.Warn("gossip: stale check", "err", err)
		}
		return nil, nil
	}
	var stale []store.Claim
	var staleIDs []store.ID
	keepC, keepID := (*fresh)[:0], (*ids)[:0]
	for i := range *fresh {
		if old[i] {
			stale, staleIDs = append(stale, (*fresh)[i]), append(staleIDs, (*ids)[i])
			continue
		}
		keepC, keepID = append(keepC, (*fresh)[i]), append(keepID, (*ids)[i])
	}
	if len(stale) > 0 {
		s.met.gossipClaims.WithLabelValues("stale").Add(float64(len(stale)))
	}
	*fresh, *ids = keepC, keepID
	return stale, staleIDs
}

// limitSigners drops the claims of signers past their gossip rate, whoever
// relays them: a flood by one key (a compromised plugin) is not stored or
// forwarded at full speed. The relaying peer is not at fault; the claims
// still arrive later by sync, which is bounded per peer. Only claims new to
// this node reach it (known and stale ones are skipped before, forged ones
// fail verification), so only the signer's own new claims spend its
// budget, and a claim over it means the signer itself writes faster than
// the rate: dropping is then what the limit is for (storing them anyway
// would let a leaked key cost every relay a commit per claim, at the rate
// of all its relays together). It reports whether it dropped any.
func (s *Swarm) limitSigners(fresh *[]store.Claim, ids *[]store.ID) bool {
	if len(*fresh) == 0 {
		return false
	}
	// Copies of a claim charged a moment ago (in flight to the store, so
	// not yet held) are not charged again.
	over := s.charged.spend(*fresh, *ids, time.Now(), s.signers.allow)
	if over == nil {
		return false
	}
	keepC, keepID := (*fresh)[:0], (*ids)[:0]
	for i := range *fresh {
		if !over[(*fresh)[i].UID] {
			keepC, keepID = append(keepC, (*fresh)[i]), append(keepID, (*ids)[i])
		}
	}
	s.met.gossipClaims.WithLabelValues("ratelimited").Add(float64(len(*fresh) - len(keepC)))
	*fresh, *ids = keepC, keepID
	return true
}

// chargedFor is how long a claim that spent its signer's budget is
// remembered: far longer than a store commit takes.
const (
	chargedFor = 2 * time.Second
	maxCharged = 1 << 14 // ids per generation (about 1 MB each at most)
)

// chargedIDs remembers the claims that spent their signer's gossip budget
// in the last chargedFor or so. A new claim is "fresh" in every message
// that carries it until the store has it, so copies in other messages
// (another order, other company: each a new message id, validated
// concurrently) would each spend the budget: anyone who got a signer's new
// claims first could spend it many times over (trust review R7-T4). Two
// generations, the older dropped every chargedFor; a full generation
// records no more (those copies are charged, as before).
type chargedIDs struct {
	mu       sync.Mutex
	cur, old map[store.ID]struct{}
	since    time.Time
}

// rotate starts a new generation once the current one is chargedFor old.
// An id is added while its generation is younger than chargedFor, so at a
// rotation chargedFor or more past the generation's end, all are stale.
func (c *chargedIDs) rotate(now time.Time) {
	d := now.Sub(c.since)
	if d < chargedFor {
		return
	}
	c.old = c.cur
	if d >= 2*chargedFor {
		c.old = nil
	}
	c.cur, c.since = nil, now
}

// spend charges each signer for its claims not charged lately and marks
// those it could pay for, all under one lock: copies of a message
// validated at the same moment must neither all charge (review 8, R8-5)
// nor pass free while another copy is being charged (review 9, R9-1). It
// returns the signers over budget; their claims stay unmarked, for a later
// copy to pay. A full generation marks no more (those copies pay again).
func (c *chargedIDs) spend(claims []store.Claim, ids []store.ID, now time.Time, allow func(uid string, n int) bool) map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rotate(now)
	counts := make(map[string]int, 1)
	charge := make([]bool, len(ids))
	for i, id := range ids {
		if !c.holds(id) {
			charge[i] = true
			counts[claims[i].UID]++
		}
	}
	var over map[string]bool
	for uid, n := range counts {
		if !allow(uid, n) {
			if over == nil {
				over = make(map[string]bool)
			}
			over[uid] = true
		}
	}
	for i, id := range ids {
		if charge[i] && !over[claims[i].UID] {
			if c.cur == nil {
				c.cur = make(map[store.ID]struct{})
			}
			if len(c.cur) < maxCharged {
				c.cur[id] = struct{}{}
			}
		}
	}
	return over
}

// holds reports whether id was charged lately; c.mu held.
func (c *chargedIDs) holds(id store.ID) bool {
	if _, ok := c.cur[id]; ok {
		return true
	}
	_, ok := c.old[id]
	return ok
}
