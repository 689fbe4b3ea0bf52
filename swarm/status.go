package swarm

import (
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// Status is a snapshot of the swarm's state.
type Status struct {
	PeerID       string
	Addrs        []string // with /p2p/<peerId>
	Name         string
	Private      bool
	Peers        int
	Bootstrap    int // bootstrap peers configured, this node itself not counted
	DHTMode      string
	RoutingTable int
	Provided     int64
	Sessions     int64
	ClaimsSent   int64
	ClaimsRecvd  int64
	PeerSync     map[string]PeerSync
	Errors       []string // recent problems for the owner, e.g. swarm key mismatch
}

// PeerSync is the sync state with one peer.
type PeerSync struct {
	LastSync    time.Time
	LastError   string
	RoundTrips  int
	ClaimsSent  int64
	ClaimsRecvd int64

	tried time.Time // the last session's end, whatever its outcome
}

// PeerInfo describes one connected peer.
type PeerInfo struct {
	PeerID         string
	Addrs          []string
	ConnectedSince time.Time
	Latency        time.Duration
	LastSync       time.Time
	ClaimsSent     int64
	ClaimsRecvd    int64
}

// Status returns the current state.
func (s *Swarm) Status() Status {
	st := Status{Name: s.cfg.Name, Private: s.cfg.PSK != nil, DHTMode: "off"}
	if s.host == nil {
		return st
	}
	st.PeerID = s.host.ID().String()
	st.Addrs = s.Addrs()
	st.Peers = len(s.host.Network().Peers())
	st.Bootstrap = len(s.bootstrap)
	if s.dht != nil {
		st.DHTMode = "client"
		if slices.Contains(s.host.Mux().Protocols(), protocol.ID(dhtPrefix+"/kad/1.0.0")) {
			st.DHTMode = "server"
		}
		st.RoutingTable = s.dht.RoutingTable().Size()
	}
	st.Provided = s.counters.provided.Load()
	st.Sessions = s.counters.sessions.Load()
	st.ClaimsSent = s.counters.claimsSent.Load()
	st.ClaimsRecvd = s.counters.claimsRecvd.Load()
	st.PeerSync = s.peerStats.syncs()
	st.Errors = s.errs.recent(time.Now())
	return st
}

// Peers lists connected peers.
func (s *Swarm) Peers() []PeerInfo {
	if s.host == nil {
		return nil
	}
	var out []PeerInfo
	for _, p := range s.host.Network().Peers() {
		pi := PeerInfo{PeerID: p.String(), Latency: s.host.Peerstore().LatencyEWMA(p)}
		for _, c := range s.host.Network().ConnsToPeer(p) {
			pi.Addrs = append(pi.Addrs, c.RemoteMultiaddr().String())
		}
		pi.ConnectedSince = s.peerStats.connectedSince(p)
		if ps, ok := s.peerStats.get(p); ok {
			pi.LastSync, pi.ClaimsSent, pi.ClaimsRecvd = ps.LastSync, ps.ClaimsSent, ps.ClaimsRecvd
		}
		out = append(out, pi)
	}
	slices.SortFunc(out, func(a, b PeerInfo) int {
		switch {
		case a.PeerID < b.PeerID:
			return -1
		case a.PeerID > b.PeerID:
			return 1
		}
		return 0
	})
	return out
}

const maxPeerStats = 1024

// peerStats keeps sync figures per peer (bounded: the least recently
// synced peers are forgotten first).
type peerStats struct {
	mu    sync.Mutex
	peers map[peer.ID]*PeerSync
	since map[peer.ID]time.Time // connected peers: when the first connection opened
}

func newPeerStats() *peerStats {
	return &peerStats{peers: map[peer.ID]*PeerSync{}, since: map[peer.ID]time.Time{}}
}

func (ps *peerStats) connected(p peer.ID, at time.Time) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if _, ok := ps.since[p]; !ok {
		ps.since[p] = at
	}
}

func (ps *peerStats) disconnected(p peer.ID) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	delete(ps.since, p)
}

func (ps *peerStats) connectedSince(p peer.ID) time.Time {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.since[p]
}

func (ps *peerStats) synced(st SyncStats) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	e, ok := ps.peers[st.Peer]
	if !ok {
		if len(ps.peers) >= maxPeerStats {
			var oldest peer.ID
			var at time.Time
			for p, q := range ps.peers {
				if oldest == "" || q.LastSync.Before(at) {
					oldest, at = p, q.LastSync
				}
			}
			delete(ps.peers, oldest)
		}
		e = &PeerSync{}
		ps.peers[st.Peer] = e
	}
	e.RoundTrips = st.RoundTrips
	e.ClaimsSent += st.ClaimsSent
	e.ClaimsRecvd += st.ClaimsRecvd
	e.tried = time.Now()
	if st.Err != nil {
		e.LastError = st.Err.Error()
		return
	}
	e.LastSync = time.Now()
	e.LastError = ""
}

func (ps *peerStats) get(p peer.ID) (PeerSync, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	e, ok := ps.peers[p]
	if !ok {
		return PeerSync{}, false
	}
	return *e, true
}

// answered reports whether the last session with p (either role)
// succeeded.
func (ps *peerStats) answered(p peer.ID) bool {
	e, ok := ps.get(p)
	return ok && !e.LastSync.IsZero() && e.LastError == ""
}

// byPromise orders peers for a round of sessions with all of them: those
// whose last session succeeded first, the most recent first, then those
// never synced, then those whose last session failed. The scheduler
// starts their sessions in this order.
func (ps *peerStats) byPromise(peers []peer.ID) []peer.ID {
	type entry struct {
		p     peer.ID
		class int
		last  time.Time
	}
	es := make([]entry, len(peers))
	ps.mu.Lock()
	for i, p := range peers {
		es[i] = entry{p: p, class: 1}
		if e, ok := ps.peers[p]; ok {
			switch {
			case e.LastError != "":
				es[i].class = 2
			case !e.LastSync.IsZero():
				es[i].class, es[i].last = 0, e.LastSync
			}
		}
	}
	ps.mu.Unlock()
	slices.SortStableFunc(es, func(a, b entry) int {
		if a.class != b.class {
			return a.class - b.class
		}
		return b.last.Compare(a.last)
	})
	out := make([]peer.ID, len(es))
	for i := range es {
		out[i] = es[i].p
	}
	return out
}

// lastSync returns when the last successful session with p ended.
// lastTry is when the last session with p ended, failed or not: the
// periodic sync's order, so peers whose sessions fail do not take every
// periodic slot (a failed session leaves LastSync as it was).
func (ps *peerStats) lastTry(p peer.ID) time.Time {
	e, _ := ps.get(p)
	return e.tried
}

func (ps *peerStats) syncs() map[string]PeerSync {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := make(map[string]PeerSync, len(ps.peers))
	for p, e := range ps.peers {
		out[p.String()] = *e
	}
	return out
}

// TopicPeers lists the peers subscribed to the swarm's topic.
func (s *Swarm) TopicPeers() []peer.ID {
	if s.topic == nil {
		return nil
	}
	return s.topic.ListPeers()
}

// MeshPeers lists the peers in this node's gossipsub mesh for the topic:
// those a forwarded claim goes to.
func (s *Swarm) MeshPeers() []peer.ID {
	s.meshMu.Lock()
	defer s.meshMu.Unlock()
	out := make([]peer.ID, 0, len(s.mesh))
	for p := range s.mesh {
		out = append(out, p)
	}
	return out
}
