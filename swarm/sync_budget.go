package swarm

import (
	"errors"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// The sync budget: claims this node sends one peer by sync, in either
// role, come out of that peer's bucket (keyedLimiter, as gossip's per-peer
// rate: kept by peer id, so reconnecting refills nothing). One session
// sends at most twice the set plus resendSlack (claimWriter), but nothing
// else bounded how often a peer could start one: a ~20-byte first turn (a
// Fingerprint of count 0 over the whole set) returned the whole set, 115
// times in 20 s for one peer id (review s12 A2).
//
// A full bucket holds that per-session bound, 2 × the set + 1,024 claims,
// read from the set at each use, so it follows the set as it grows. An
// honest peer takes the whole set once (its cold catch-up, at most one set)
// and then only what gossip missed: neither comes near it. A spent bucket
// refills in syncBudgetRefill. A session is refused only at its start, with
// ERROR busy (no strike; the peer's retries and the periodic round try
// again), while the peer's bucket is empty; one under way is never cut, so a
// peer is always sent all it lacks in one go (a list-mode home offered an
// open node's strangers' claims again each session, past the memory of
// refusals, still reaches the trusted claims behind them) and the bucket
// may go past empty by one session. Per peer id that makes at most about
// 2 sets per syncBudgetRefill once the first 3 or 4 are spent.
const syncBudgetRefill = 10 * time.Minute

// errSyncBudget: this node starts no session with a peer whose sync budget
// is spent (it would push the peer claims; the peer is asked again later).
var errSyncBudget = errors.New("sync budget for this peer spent; it refills within minutes")

// newSyncBudget returns the per-peer sync budget over a set of setLen claims.
func newSyncBudget(setLen func() int) *keyedLimiter[peer.ID] {
	return &keyedLimiter[peer.ID]{
		size:   func() float64 { return float64(2*setLen() + resendSlack) },
		refill: syncBudgetRefill,
		max:    maxPeerBuckets,
		keys:   map[peer.ID]*keyedBucket{},
	}
}

// budgetSpent reports whether p's sync budget is spent; it logs and counts
// the refusal that follows (role: "initiator" for a session this node does
// not start, "responder" for one it answers ERROR busy).
func (s *Swarm) budgetSpent(p peer.ID, role string) bool {
	if s.syncBudget == nil || !s.syncBudget.empty(p, time.Now()) {
		return false
	}
	s.log.Debug("sync budget spent: no session", "peer", p, "role", role)
	s.met.syncRefused.WithLabelValues(role, "budget").Inc()
	return true
}

// spendBudget charges p's budget with n claims sent to it.
func (s *Swarm) spendBudget(p peer.ID, n int) {
	if s.syncBudget != nil && n > 0 {
		s.syncBudget.spend(p, n, time.Now())
	}
}
