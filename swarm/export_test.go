package swarm

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	dto "github.com/prometheus/client_model/go"
)

// Test-only access to internals for the external tests.
var EncodeGossip = encodeGossip

// NewGossipAttacker is newGossipAttacker, for the external tests.
var NewGossipAttacker = newGossipAttacker

// RaceEnabled: the race detector makes SQLite (and so the store) many
// times slower; the heaviest tests move fewer claims under it.
const RaceEnabled = raceEnabled

// MaxInterestCIDs is the most cids one interest fetch asks a peer for.
const MaxInterestCIDs = maxInterestFetches * maxFetchCIDs

// RefusedLen is how many claims the swarm remembers as refused.
func (s *Swarm) RefusedLen() int { return s.refused.len() }

// Struck reports whether p has been held to account for an invalid
// delivery (a strike or a block).
func (s *Swarm) Struck(p peer.ID) bool {
	b := s.penalties
	b.mu.Lock()
	defer b.mu.Unlock()
	_, struck := b.strikes[p]
	_, blocked := b.blocked[p]
	return struck || blocked
}

// FetchInterest runs one interest fetch from p, as the scheduler does.
func (s *Swarm) FetchInterest(ctx context.Context, p peer.ID) { s.fetchInterest(ctx, p) }

// GossipClaims is the validator's count of claims with one fate
// ("new", "ratelimited", "untrusted", …).
func (s *Swarm) GossipClaims(fate string) float64 {
	var m dto.Metric
	if err := s.met.gossipClaims.WithLabelValues(fate).Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// InboundSessions is how many sync sessions p runs against this node.
func (s *Swarm) InboundSessions(p peer.ID) int {
	s.sessions.mu.Lock()
	defer s.sessions.mu.Unlock()
	return s.sessions.n[p]
}

// FetchFrom asks p for the claims of cids, as a lookup does.
func (s *Swarm) FetchFrom(ctx context.Context, p peer.ID, cids []string) (int, error) {
	return s.fetchFrom(ctx, p, cids)
}

// SetSessionLimits replaces the sync session limits (idle between frames,
// lifetime before bytes count, bytes per second that extend it, most
// lifetime); call it before Open.
func (s *Swarm) SetSessionLimits(idle, base time.Duration, minRate int64, most time.Duration) {
	s.sessionLimits = sessionLimits{idle: idle, base: base, minRate: minRate, max: most}
}

// ErrSessionExpired is the error of a session its guard cut short.
var ErrSessionExpired = errSessionExpired

// SetLookupDial allows a provider dial d for the rest of the test (set
// before the test's nodes open; restored after they close).
func SetLookupDial(t interface{ Cleanup(func()) }, d time.Duration) {
	old := lookupDial
	lookupDial = d
	t.Cleanup(func() { lookupDial = old })
}

// SetBootstrapQuiet shortens how long a node waits before it reports its
// bootstrap peers unreachable; call it between New and Open.
func (s *Swarm) SetBootstrapQuiet(d time.Duration) { s.bootstrapQuiet = d }
