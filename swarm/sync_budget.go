package swarm

import (
	"errors"
	"net/netip"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
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

// Peer ids cost nothing, so each fresh id started with a full bucket: 8
// ids pulled 24 whole sets in 33 s (review s12 E2). The network a peer
// connects from has a budget too, netBudgetPeers peers' worth, charged
// with everything its peers are sent: an IPv4 address (/32) or an IPv6
// site (/48, which holds the /56 a home gets). Private, link-local and
// loopback networks have none: homes behind one router, or the nodes of a
// test, share an address there (as in the resource manager's limits).
const netBudgetPeers = 8

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

// newNetBudget returns the per-network sync budget (netBudgetPeers peers'
// worth).
func newNetBudget(setLen func() int) *keyedLimiter[string] {
	return &keyedLimiter[string]{
		size:   func() float64 { return netBudgetPeers * float64(2*setLen()+resendSlack) },
		refill: syncBudgetRefill,
		max:    maxPeerBuckets,
		keys:   map[string]*keyedBucket{},
	}
}

// budgetNet is the network whose budget a connection from addr charges:
// "" for none (private, loopback, or not IP). A variable so that tests on
// loopback can key their peers as if they were public.
var budgetNet = func(addr ma.Multiaddr) string {
	ip, err := manet.ToIP(addr)
	if err != nil {
		return ""
	}
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return ""
	}
	a = a.Unmap()
	if nat64.Contains(a) { // an IPv4 peer reached from an IPv6-only network: its own address
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:]))
	}
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || isPrivateNet(a) {
		return ""
	}
	bits := 32
	if a.Is6() {
		bits = 48
	}
	pre, _ := a.Prefix(bits)
	return pre.String()
}

// nat64 is the well-known NAT64 prefix (RFC 6052): the IPv4 address is in
// the last 32 bits.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// isPrivateNet reports whether a lies in one of the prefixes the resource
// manager treats as a shared home or carrier network.
func isPrivateNet(a netip.Addr) bool {
	for _, p := range privatePrefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// budgetOf is the budget key of a connection: its peer and network.
type budgetOf struct {
	peer peer.ID
	net  string
}

func budgetOfConn(c network.Conn) budgetOf {
	return budgetOf{c.RemotePeer(), budgetNet(c.RemoteMultiaddr())}
}

// budgetSpent says why no session may run with b's peer: "" when neither
// its sync budget nor its network's is spent, else what to tell it. It
// logs and counts the refusal that follows (role: "initiator" for a
// session this node does not start, "responder" for one it answers ERROR
// busy).
func (s *Swarm) budgetSpent(b budgetOf, role string) string {
	if s.syncBudget == nil {
		return ""
	}
	now := time.Now()
	var reason, why string
	switch {
	case s.syncBudget.empty(b.peer, now):
		reason, why = "budget", "sync budget for this peer spent; try again in minutes"
	case b.net != "" && s.netBudget.empty(b.net, now):
		reason, why = "net_budget", "sync budget for the peers of this network spent; try again in minutes"
	default:
		return ""
	}
	s.log.Debug("sync budget spent: no session", "peer", b.peer, "net", b.net, "role", role, "reason", reason)
	s.met.syncRefused.WithLabelValues(role, reason).Inc()
	return why
}

// spendBudget charges b's peer and network with n claims sent to it.
func (s *Swarm) spendBudget(b budgetOf, n int) {
	if s.syncBudget == nil || n <= 0 {
		return
	}
	now := time.Now()
	s.syncBudget.spend(b.peer, n, now)
	if b.net != "" {
		s.netBudget.spend(b.net, n, now)
	}
}
