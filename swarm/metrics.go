package swarm

import (
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"
)

// metrics are the swarm's Prometheus series (namespace metanode_swarm).
type metrics struct {
	gossipMsgs        *prometheus.CounterVec // validated messages by result
	gossipClaims      *prometheus.CounterVec // claims seen by the validator by fate
	gossipDuplicates  prometheus.Counter     // messages pubsub dropped as already seen
	gossipRecvBytes   prometheus.Counter     // RPC bytes received (topic data and control)
	gossipPublished   prometheus.Counter
	gossipRelayed     prometheus.Counter // claims of ignored messages published again
	publishDropped    prometheus.Counter
	invalidDeliveries prometheus.Counter
	peersBlocked      prometheus.Counter

	syncSessions   *prometheus.CounterVec // role, result
	syncBytes      *prometheus.CounterVec // dir
	syncClaims     *prometheus.CounterVec // dir
	syncRoundTrips prometheus.Histogram
	syncRefused    *prometheus.CounterVec // role, reason

	fetches     *prometheus.CounterVec // result
	provides    *prometheus.CounterVec // result
	lookups     *prometheus.CounterVec // result
	provideQ    prometheus.GaugeFunc
	routingSize prometheus.GaugeFunc
	peers       prometheus.GaugeFunc

	all []prometheus.Collector
}

func newMetrics(s *Swarm) *metrics {
	const ns, sub = "metanode", "swarm"
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help})
	}
	vec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help}, labels)
	}
	gauge := func(name, help string, f func() float64) prometheus.GaugeFunc {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help}, f)
	}
	m := &metrics{
		gossipMsgs:        vec("gossip_messages_total", "Gossip messages validated, by result (accepted, ignored, rejected).", "result"),
		gossipClaims:      vec("gossip_claims_total", "Claims in received gossip, by fate (new, known, stale, untrusted, future, invalid, ratelimited).", "fate"),
		gossipDuplicates:  counter("gossip_duplicate_messages_total", "Gossip messages received again and dropped by pubsub."),
		gossipRecvBytes:   counter("gossip_received_bytes_total", "Bytes of pubsub RPCs received (messages and control)."),
		gossipPublished:   counter("gossip_published_claims_total", "Local claims published to the topic."),
		gossipRelayed:     counter("gossip_relayed_claims_total", "Claims of ignored gossip messages (untrusted, future-dated or over-rate claims with them) that this node stored as new and published again as its own batch."),
		publishDropped:    counter("gossip_publish_dropped_claims_total", "Local claims not gossiped because the publish queue was full (sync carries them)."),
		invalidDeliveries: counter("invalid_deliveries_total", "Deliveries of malformed or badly signed claims, any protocol."),
		peersBlocked:      counter("peers_blocked_total", "Peers disconnected and refused after repeated invalid deliveries."),
		syncSessions:      vec("sync_sessions_total", "Sync sessions, by role (initiator, responder) and result (ok, error).", "role", "result"),
		syncBytes:         vec("sync_bytes_total", "Sync protocol bytes, by direction (sent, received).", "dir"),
		syncClaims:        vec("sync_claims_total", "Claims moved by sync, by direction: sent, received (new to this node), received_all (whatever the store said: above received, copies).", "dir"),
		syncRefused:       vec("sync_refused_total", "Sync sessions refused, by role (responder: a peer's session answered ERROR; initiator: a session this node did not start) and reason (busy, not_ready, budget: the peer's sync budget is spent, net_budget: its network's).", "role", "reason"),
		syncRoundTrips: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "sync_round_trips", Help: "Round trips per sync session.", Buckets: []float64{1, 2, 3, 4, 6, 8, 12, 16, 32}}),
		fetches:  vec("fetch_requests_total", "Fetch requests made, by result (ok, empty, error).", "result"),
		provides: vec("dht_provides_total", "DHT provide operations, by result (ok, error).", "result"),
		lookups:  vec("lookups_total", "Remote lookups, by result (found, notfound, error).", "result"),
	}
	m.provideQ = gauge("dht_provide_queue", "Cids waiting to be provided.", func() float64 { return float64(s.provQueue.len()) })
	m.routingSize = gauge("dht_routing_table_peers", "Peers in the DHT routing table.", func() float64 {
		if d := s.dht; d != nil {
			return float64(d.RoutingTable().Size())
		}
		return 0
	})
	m.peers = gauge("peers", "Connected peers.", func() float64 {
		if h := s.host; h != nil {
			return float64(len(h.Network().Peers()))
		}
		return 0
	})
	m.all = []prometheus.Collector{m.gossipMsgs, m.gossipClaims, m.gossipDuplicates, m.gossipRecvBytes,
		m.gossipPublished, m.gossipRelayed, m.publishDropped, m.invalidDeliveries, m.peersBlocked, m.syncSessions, m.syncBytes,
		m.syncClaims, m.syncRoundTrips, m.syncRefused, m.fetches, m.provides, m.lookups, m.provideQ, m.routingSize, m.peers}
	return m
}

func (m *metrics) register(r prometheus.Registerer) error {
	for i, c := range m.all {
		if err := r.Register(c); err != nil {
			for _, done := range m.all[:i] {
				r.Unregister(done)
			}
			return err
		}
	}
	return nil
}

func (m *metrics) unregister(r prometheus.Registerer) {
	for _, c := range m.all {
		r.Unregister(c)
	}
}

// counters are plain figures the benchmark and Status read.
type counters struct {
	published    atomicInt
	gossipStored atomicInt
	recvRPCBytes atomicInt
	recvMsgBytes atomicInt // topic message data received, duplicates included
	recvMsgs     atomicInt
	duplicates   atomicInt
	provided     atomicInt
	sessions     atomicInt
	claimsSent   atomicInt
	claimsRecvd  atomicInt
	dhtFound     atomicInt
	syncBytesIn  atomicInt
	syncBytesOut atomicInt
}

// Counters is a snapshot of traffic figures (the benchmark reads them).
type Counters struct {
	Published       int64 // local claims published
	GossipStored    int64 // gossiped claims handed to the store
	GossipRPCBytes  int64 // pubsub RPC bytes received, control included
	GossipDataBytes int64 // topic message bytes received, duplicates included
	GossipMessages  int64 // topic messages received, duplicates included
	Duplicates      int64 // of which dropped as already seen
	Provided        int64
	Sessions        int64
	ClaimsSent      int64 // by sync
	ClaimsRecvd     int64 // by sync
	LookupsViaDHT   int64 // lookups answered by a provider the DHT named
	SyncBytesIn     int64 // sync protocol bytes received, both roles
	SyncBytesOut    int64
}

// Counters returns the traffic figures so far.
func (s *Swarm) Counters() Counters {
	c := &s.counters
	return Counters{
		Published: c.published.Load(), GossipStored: c.gossipStored.Load(),
		GossipRPCBytes: c.recvRPCBytes.Load(), GossipDataBytes: c.recvMsgBytes.Load(),
		GossipMessages: c.recvMsgs.Load(), Duplicates: c.duplicates.Load(),
		Provided: c.provided.Load(), Sessions: c.sessions.Load(),
		ClaimsSent: c.claimsSent.Load(), ClaimsRecvd: c.claimsRecvd.Load(),
		LookupsViaDHT: c.dhtFound.Load(),
		SyncBytesIn:   c.syncBytesIn.Load(), SyncBytesOut: c.syncBytesOut.Load(),
	}
}

// tracer counts pubsub traffic (pubsub exports no metrics of its own).
type tracer struct{ s *Swarm }

var _ pubsub.RawTracer = (*tracer)(nil)

func (t *tracer) RecvRPC(rpc *pubsub.RPC) {
	n := proto.Size(&rpc.RPC)
	t.s.counters.recvRPCBytes.Add(int64(n))
	t.s.met.gossipRecvBytes.Add(float64(n))
	for _, m := range rpc.GetPublish() {
		t.s.counters.recvMsgs.Add(1)
		t.s.counters.recvMsgBytes.Add(int64(len(m.GetData())))
	}
}

func (t *tracer) Graft(p peer.ID, topic string) {
	if topic == t.s.Topic() {
		t.s.meshMu.Lock()
		t.s.mesh[p] = struct{}{}
		t.s.meshMu.Unlock()
	}
}

func (t *tracer) Prune(p peer.ID, topic string) {
	if topic == t.s.Topic() {
		t.s.meshMu.Lock()
		delete(t.s.mesh, p)
		t.s.meshMu.Unlock()
	}
}

func (t *tracer) DuplicateMessage(*pubsub.Message) {
	t.s.counters.duplicates.Add(1)
	t.s.met.gossipDuplicates.Inc()
}

func (t *tracer) AddPeer(peer.ID, protocol.ID)             {}
func (t *tracer) RemovePeer(peer.ID)                       {}
func (t *tracer) OnNewOutboundStream(peer.ID, protocol.ID) {}
func (t *tracer) OnClosedOutboundStream(peer.ID)           {}
func (t *tracer) Join(string)                              {}
func (t *tracer) Leave(string)                             {}

func (t *tracer) ValidateMessage(*pubsub.Message)                      {}
func (t *tracer) DeliverMessage(*pubsub.Message)                       {}
func (t *tracer) RejectMessage(*pubsub.Message, string)                {}
func (t *tracer) ThrottlePeer(peer.ID)                                 {}
func (t *tracer) SendRPC(*pubsub.RPC, peer.ID)                         {}
func (t *tracer) SendRPCCompleted(*pubsub.RPC, peer.ID, time.Duration) {}
func (t *tracer) DropRPC(*pubsub.RPC, peer.ID)                         {}
func (t *tracer) UndeliverableMessage(*pubsub.Message)                 {}

// recordSync folds a finished session into the metrics and per-peer state.
func (s *Swarm) recordSync(st SyncStats) {
	role, result := "responder", "ok"
	if st.Initiator {
		role = "initiator"
	}
	if st.Err != nil {
		result = "error"
	}
	s.met.syncSessions.WithLabelValues(role, result).Inc()
	s.met.syncBytes.WithLabelValues("sent").Add(float64(st.BytesSent))
	s.met.syncBytes.WithLabelValues("received").Add(float64(st.BytesRecvd))
	s.met.syncClaims.WithLabelValues("sent").Add(float64(st.ClaimsSent))
	s.met.syncClaims.WithLabelValues("received").Add(float64(st.ClaimsRecvd))
	s.met.syncClaims.WithLabelValues("received_all").Add(float64(st.ClaimsMoved))
	s.met.syncRoundTrips.Observe(float64(st.RoundTrips))
	s.counters.sessions.Add(1)
	s.counters.claimsSent.Add(st.ClaimsSent)
	s.counters.claimsRecvd.Add(st.ClaimsRecvd)
	s.counters.syncBytesIn.Add(st.BytesRecvd)
	s.counters.syncBytesOut.Add(st.BytesSent)
	s.peerStats.synced(st)
	if st.ClaimsRecvd > 0 { // claims new to this node: others may lack them too
		s.markUseful(st.Peer)
		select {
		case s.cascadeCh <- st.Peer:
		default:
		}
	}
	if st.Err != nil && s.ctx.Err() == nil {
		s.log.Debug("sync session failed", "peer", st.Peer, "initiator", st.Initiator, "err", st.Err)
		return
	}
	if st.ClaimsRecvd >= catchUpLogMin {
		// A catch-up (back from an absence, a new trust): the owner
		// sees it at the default level; everyday sessions stay at debug.
		s.log.Info("caught up from a peer", "peer", st.Peer, "new_claims", st.ClaimsRecvd,
			"bytes_in", st.BytesRecvd, "took", st.Duration.Round(time.Millisecond))
		return
	}
	s.log.Debug("sync session", "peer", st.Peer, "initiator", st.Initiator, "round_trips", st.RoundTrips,
		"sent", st.ClaimsSent, "received", st.ClaimsMoved, "bytes_out", st.BytesSent, "bytes_in", st.BytesRecvd,
		"took", st.Duration)
}

// catchUpLogMin is how many new claims make a sync session worth a line
// at info level.
const catchUpLogMin = 1000
