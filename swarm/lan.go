package swarm

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// LAN peers. mDNS (zeroconf) reports a peer once per record TTL (3200 s)
// and not again while its entry lives, so two homes that know each other
// only through mDNS would stay apart for most of an hour after their
// connection dropped. The connector remembers the LAN peers it reached
// and redials one that dropped, with backoff, until it has been gone for
// lanForget (mDNS reports it afresh by then if it is back). Peers it never
// reached (another swarm key) are not remembered, so they are not redialed.
const (
	lanCheck      = 2 * time.Second // how often the connector looks for dropped LAN peers
	lanForget     = time.Hour
	lanBackoffMin = time.Second
	lanBackoffMax = 5 * time.Minute
	maxLANPeers   = 256
)

type lanPeers struct {
	mu    sync.Mutex
	peers map[peer.ID]*lanPeer
}

type lanPeer struct {
	ai      peer.AddrInfo
	seen    time.Time // last found, reached or seen connected
	next    time.Time // no dial before
	backoff time.Duration
}

// add remembers a LAN peer the node reached (or found connected) at now.
func (l *lanPeers) add(ai peer.AddrInfo, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.peers == nil {
		l.peers = map[peer.ID]*lanPeer{}
	}
	if p, ok := l.peers[ai.ID]; ok {
		if len(ai.Addrs) > 0 {
			p.ai = ai
		}
		p.seen, p.next, p.backoff = now, time.Time{}, 0
		return
	}
	if len(l.peers) >= maxLANPeers { // drop the one gone longest
		var oldest peer.ID
		for id, p := range l.peers {
			if oldest == "" || p.seen.Before(l.peers[oldest].seen) {
				oldest = id
			}
		}
		delete(l.peers, oldest)
	}
	l.peers[ai.ID] = &lanPeer{ai: ai, seen: now}
}

// due returns the remembered peers to dial at now: not connected and past
// their backoff. It forgets those gone longer than lanForget.
func (l *lanPeers) due(now time.Time, connected func(peer.ID) bool) []peer.AddrInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []peer.AddrInfo
	for id, p := range l.peers {
		switch {
		case connected(id):
			p.seen, p.next, p.backoff = now, time.Time{}, 0
		case now.Sub(p.seen) > lanForget:
			delete(l.peers, id)
		case !now.Before(p.next):
			out = append(out, p.ai)
		}
	}
	return out
}

// failed puts off p's next dial: exponential backoff with jitter.
func (l *lanPeers) failed(id peer.ID, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.peers[id]
	if !ok {
		return
	}
	p.backoff = min(max(2*p.backoff, lanBackoffMin), lanBackoffMax)
	p.next = now.Add(p.backoff + time.Duration(rand.Int64N(int64(p.backoff)/2+1)))
}

func (l *lanPeers) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.peers)
}

// redialLAN dials, one at a time, the LAN peers whose connection dropped.
// Blocked peers wait (and are forgotten if they stay blocked). A node at
// the connection manager's low water has peers enough: redialing there
// would undo its trims.
func (s *Swarm) redialLAN(ctx context.Context) {
	if len(s.host.Network().Peers()) >= max(1, s.cfg.MaxConns*3/4) {
		return
	}
	connected := func(p peer.ID) bool { return s.host.Network().Connectedness(p) == network.Connected }
	for _, ai := range s.lan.due(time.Now(), connected) {
		if s.penalties.isBlocked(ai.ID) {
			continue
		}
		err := s.dial(ctx, ai)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.lan.failed(ai.ID, time.Now())
			s.log.Debug("LAN peer unreachable", "peer", ai.ID, "err", err)
			continue
		}
		s.lan.add(ai, time.Now())
		s.log.Info("LAN peer reconnected", "peer", ai.ID)
	}
}
