package swarm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	"github.com/metanode/metanode/store"
)

// Store is the claims engine as the swarm uses it; *store.Store implements
// it (the node may wrap it, e.g. to filter by interest).
type Store interface {
	Submit(ctx context.Context, claims []store.Claim, opt store.SubmitOptions) ([]store.Result, error)
	Trusted(uid string) bool
	TrustMode() store.TrustMode
	SyncSet() *store.SyncSet
	SyncReady() <-chan struct{}
	ClaimsByItems(ctx context.Context, items []store.SyncItem) ([]store.Claim, error)
	ClaimsInRange(ctx context.Context, lo, hi store.SyncItem, limit int) ([]store.Claim, error)
	FetchClaims(ctx context.Context, cid string) ([]store.Claim, error)
	CIDs(ctx context.Context, after string, limit int) ([]string, error)
	// Superseded reports which claims the stored row of their (cid, key,
	// signer) equals or beats: the gossip validator skips them before they
	// spend a signer's budget.
	Superseded(ctx context.Context, claims []store.Claim, ids []store.ID) ([]bool, error)
	// HasCID reports whether the store holds claims about cid.
	HasCID(ctx context.Context, cid string) (bool, error)
}

var _ Store = (*store.Store)(nil)

// ErrNotFound: no peer knows the cid within the lookup's timeout.
var ErrNotFound = errors.New("no peer knows this cid")

// ErrClosed is returned by a second Close and by calls on a closed swarm.
var ErrClosed = errors.New("swarm closed")

// errNotOpen is returned by calls that need an open swarm.
var errNotOpen = errors.New("swarm not open")

// Defaults for Config fields left zero.
const (
	DefaultName         = "metamesh"
	DefaultMaxConns     = 64
	DefaultSyncInterval = 30 * time.Second
	DefaultLookup       = 5 * time.Second
	DefaultProvidePerHr = 3600
	DefaultGossipRate   = 2000 // claims per second per peer
	DefaultSignerRate   = 1000 // claims per second per signer, from all peers' gossip
	maxSessionsPerPeer  = 2    // inbound sync sessions one peer may run at once
	DefaultBlockFor     = 10 * time.Minute
	DefaultPort         = 4821 // cmd/metanode/swarmport.go: why
)

// Config configures a Swarm. Zero fields take the documented defaults.
type Config struct {
	Identity *store.Signer // the node key: the peer id and the node uid both come from it
	Store    Store

	Listen    []string // multiaddrs; default TCP and QUIC on DefaultPort (TCP only with a PSK)
	Bootstrap []string // multiaddrs ending in /p2p/<peerId>: dialed, protected, redialed with backoff
	Name      string   // swarm name: topic /metanode/<name>/claims/1; default DefaultName
	PSK       []byte   // 32-byte pre-shared key: a private swarm; nil for a public one

	MDNS         bool // LAN discovery (_metanode._udp)
	DHTServer    bool // kad-dht server mode (bootstrap, private or LAN swarms)
	RelayService bool // act as a relay (bootstrap profile)
	PeerExchange bool // gossipsub peer exchange (bootstrap profile)

	MaxConns      int           // connection manager high water; default DefaultMaxConns
	SyncInterval  time.Duration // periodic reconciliation; default DefaultSyncInterval
	LookupTimeout time.Duration // remote lookups; default DefaultLookup
	ProvidePerHr  int           // bound on DHT provides per hour; default 3600

	// Interest, when set, puts the node in interest mode: it keeps only
	// claims about the cids this returns (the node's Store filters Submit),
	// so sync sessions only push, and the swarm fetches the claims of these
	// cids from each new peer and periodically.
	Interest func(ctx context.Context) ([]string, error)

	Relays     []string      // static relays (multiaddrs with /p2p/) for hosts behind NAT; none by default
	PortMap    bool          // ask the router for a port mapping (UPnP / NAT-PMP)
	Public     bool          // force public reachability (a bootstrap node on a public address)
	MaxSkew    time.Duration // future-timestamp allowance in gossip; default store.DefaultMaxSkew
	GossipRate int           // new claims per second accepted from one peer's gossip; default DefaultGossipRate
	SignerRate int           // new claims per second accepted from one signer in gossip; default DefaultSignerRate
	BlockFor   time.Duration // how long a peer that sent invalid claims is refused; default DefaultBlockFor

	// NoAutoSync starts no sync session by itself (on connections, topic
	// joins, after sessions or periodically): only SyncWith and Resync do.
	// Benchmarks use it to measure one session at a time; peers may still
	// start sessions with this node.
	NoAutoSync bool

	// OnPair answers a joining node's pairing request (inviter side); nil
	// refuses every request. See pair.go.
	OnPair func(ctx context.Context, peerUID string, token []byte) PairAnswer

	Logger     *slog.Logger
	Registerer prometheus.Registerer

	// Host, when set, is used instead of building one (tests pass mocknet
	// hosts). The swarm does not close a host it did not build.
	Host host.Host
}

func (c *Config) setDefaults() {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.SyncInterval <= 0 {
		c.SyncInterval = DefaultSyncInterval
	}
	if c.LookupTimeout <= 0 {
		c.LookupTimeout = DefaultLookup
	}
	if c.ProvidePerHr <= 0 {
		c.ProvidePerHr = DefaultProvidePerHr
	}
	if c.MaxSkew <= 0 {
		c.MaxSkew = store.DefaultMaxSkew
	}
	if c.GossipRate <= 0 {
		c.GossipRate = DefaultGossipRate
	}
	if c.SignerRate <= 0 {
		c.SignerRate = DefaultSignerRate
	}
	if c.BlockFor <= 0 {
		c.BlockFor = DefaultBlockFor
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Swarm shares a node's claims with its peers: gossip, catch-up, lookups.
type Swarm struct {
	cfg             Config
	log             *slog.Logger
	reconcileParams reconcileParams
	sessionLimits   sessionLimits // set before Open only
	// scoreInspect, when set before Open, receives gossipsub's peer
	// scores now and then (tests).
	scoreInspect pubsub.PeerScoreInspectFn
	// inflight is what the live sync sessions are asking their peers for,
	// while the sync scheduler runs (inflight.go).
	inflight atomic.Pointer[inflight]
	// foundDial, when set before Open, dials the peers mDNS found instead
	// of dialFound (tests: dials that block, counted).
	foundDial func(context.Context, peer.AddrInfo) error
	// sessionRun, when set before Open, runs the sessions the scheduler
	// starts instead of runSession (tests: when they start, not what they do).
	sessionRun func(ctx context.Context, sem slots, p peer.ID, interest bool) sessionEnd

	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // the swarm's loops
	state  atomic.Int32   // 0 new, 1 open, 2 closed
	mu     sync.Mutex     // serialises Open and Close

	// Stream handlers run on libp2p's goroutines; they are counted so that
	// Close waits for them too.
	hmu      sync.Mutex
	closing  bool
	handlers sync.WaitGroup

	host     host.Host
	ownHost  bool
	notifee  *network.NotifyBundle
	gater    *gater
	psCancel context.CancelFunc
	ps       *pubsub.PubSub
	topic    *pubsub.Topic
	sub      *pubsub.Subscription
	dht      *dht.IpfsDHT
	mdns     mdns.Service

	bootstrap []peer.AddrInfo
	relays    []peer.AddrInfo

	pubCh     chan []store.Claim // Publish → batcher
	gossipIn  chan gossipBatch   // validated gossip → store
	connCh    chan peer.ID       // new connections → sync scheduler
	resyncCh  chan struct{}
	cascadeCh chan peer.ID       // sessions that brought claims in → sync the other peers
	joinCh    chan peer.ID       // peers that joined the topic → one more sync
	foundCh   chan peer.AddrInfo // mDNS → connector
	kickCh    chan peer.ID       // blocked peers to disconnect
	provideCh chan struct{}      // new cids queued
	inbound   *semaphore.Weighted
	// fetchServes bounds the fetch requests served at once.
	fetchServes *semaphore.Weighted

	meshMu sync.Mutex
	mesh   map[peer.ID]struct{} // our gossipsub mesh on the topic (from the tracer)

	provQueue         provideQueue
	lan               lanPeers // LAN peers mDNS found and the node reached (lan.go)
	refused           *refusedSet
	refusedPerSession int64         // maxRefusedInSession; tests make it small
	bootstrapQuiet    time.Duration // see bootstrapQuiet; tests make it short
	connGrace         time.Duration // see connGrace; tests make it short
	penalties         *penaltyBox
	limiter           *keyedLimiter[peer.ID] // new gossip claims per peer
	signers           *keyedLimiter[string]  // new gossip claims per signer uid
	charged           chargedIDs             // claims that spent their signer's budget just now
	sessions          *peerSessions          // inbound sync sessions per peer
	syncBudget        *keyedLimiter[peer.ID] // claims sent by sync per peer (sync_budget.go)
	netBudget         *keyedLimiter[string]  // and per network the peers connect from
	errs              *errorLog
	peerStats         *peerStats
	met               *metrics
	metRegistered     bool
	counters          counters
}

// New returns an unopened swarm; it does no I/O.
func New(cfg Config) *Swarm {
	cfg.setDefaults()
	return &Swarm{
		cfg:             cfg,
		log:             cfg.Logger.With("component", "swarm"),
		reconcileParams: defaultReconcileParams,
		sessionLimits:   defaultSessionLimits,
		bootstrapQuiet:  bootstrapQuiet,
		connGrace:       connGrace,
	}
}

// Topic returns the gossip topic of the swarm.
func (s *Swarm) Topic() string { return "/metanode/" + s.cfg.Name + "/claims/1" }

// Open starts the host, gossip, sync, DHT and discovery. ctx bounds only
// Open; the swarm's loops run on its own context until Close.
func (s *Swarm) Open(ctx context.Context) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state.Load() {
	case 1:
		return errors.New("open swarm: already open")
	case 2:
		return ErrClosed
	}
	if s.cfg.Identity == nil || s.cfg.Store == nil {
		return errors.New("open swarm: Identity and Store are required")
	}
	if s.cfg.PSK != nil && len(s.cfg.PSK) != 32 {
		return fmt.Errorf("open swarm: swarm key of %d bytes, want 32", len(s.cfg.PSK))
	}
	if s.bootstrap, err = parseAddrInfos(s.cfg.Bootstrap); err != nil {
		return fmt.Errorf("open swarm: bootstrap: %w", err)
	}
	if s.relays, err = parseAddrInfos(s.cfg.Relays); err != nil {
		return fmt.Errorf("open swarm: relays: %w", err)
	}

	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.pubCh = make(chan []store.Claim, 1024)
	s.gossipIn = make(chan gossipBatch, 256)
	s.connCh = make(chan peer.ID, 256)
	s.resyncCh = make(chan struct{}, 1)
	s.cascadeCh = make(chan peer.ID, 64)
	s.joinCh = make(chan peer.ID, 64)
	s.foundCh = make(chan peer.AddrInfo, 64)
	s.kickCh = make(chan peer.ID, 64)
	s.provideCh = make(chan struct{}, 1)
	s.inbound = semaphore.NewWeighted(maxInboundSyncs)
	s.fetchServes = semaphore.NewWeighted(maxFetchServes)
	s.refused = newRefusedSet(maxRefused)
	s.refusedPerSession = maxRefusedInSession
	s.penalties = newPenaltyBox(s.cfg.BlockFor)
	s.limiter = newPeerLimiter(s.cfg.GossipRate)
	s.signers = newKeyedLimiter[string](s.cfg.SignerRate, maxSignerBuckets)
	s.sessions = newPeerSessions(maxSessionsPerPeer)
	s.syncBudget = newSyncBudget(func() int { return s.cfg.Store.SyncSet().Len() })
	s.netBudget = newNetBudget(func() int { return s.cfg.Store.SyncSet().Len() })
	s.errs = newErrorLog()
	s.peerStats = newPeerStats()
	s.gater = &gater{s: s}
	s.mesh = map[peer.ID]struct{}{}
	s.met = newMetrics(s)

	defer func() {
		if err != nil {
			s.shutdown()
			err = fmt.Errorf("open swarm: %w", err)
		}
	}()
	if s.cfg.Host != nil {
		s.host = s.cfg.Host
	} else {
		if s.host, err = s.buildHost(); err != nil {
			return err
		}
		s.ownHost = true
	}
	s.notifee = &network.NotifyBundle{
		ConnectedF:    func(_ network.Network, c network.Conn) { s.onConnected(c) },
		DisconnectedF: func(_ network.Network, c network.Conn) { s.onDisconnected(c) },
	}
	s.host.Network().Notify(s.notifee)

	if err := s.openGossip(); err != nil {
		return err
	}
	s.host.SetStreamHandler(ProtocolSync, s.handleSync)
	s.host.SetStreamHandler(ProtocolFetch, s.bounded(fetchTimeout, s.serveFetch))
	s.host.SetStreamHandler(ProtocolPair, s.bounded(pairTimeout, s.servePair))
	// A bootstrap list shared by the nodes of a swarm names each of them
	// too (bootstrap nodes list one another): dialing itself is no
	// connection, yet counted as one it would hide that no other answers.
	s.bootstrap = slices.DeleteFunc(s.bootstrap, func(ai peer.AddrInfo) bool { return ai.ID == s.host.ID() })
	if err := s.openDHT(); err != nil {
		return err
	}
	for _, ai := range s.bootstrap {
		s.host.Peerstore().AddAddrs(ai.ID, ai.Addrs, peerstoreForever)
		s.host.ConnManager().Protect(ai.ID, "bootstrap")
	}

	// Registered once the host and the DHT exist: the gauges read them.
	if s.cfg.Registerer != nil {
		if err := s.met.register(s.cfg.Registerer); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		s.metRegistered = true
	}
	s.state.Store(1)
	s.goLoop(s.runPublisher)
	s.goLoop(s.runGossipReader)
	s.goLoop(s.runTopicEvents)
	for range gossipStoreWorkers {
		s.goLoop(s.runGossipStore)
	}
	s.goLoop(s.runSyncScheduler)
	s.goLoop(s.runProvider)
	s.goLoop(s.runBootstrap)
	s.goLoop(s.runConnector)
	if s.cfg.MDNS {
		s.mdns = mdns.NewMdnsService(s.host, MDNSService, mdnsNotifee{s})
		if err := s.mdns.Start(); err != nil {
			s.log.Warn("mdns unavailable", "err", err)
			s.mdns = nil
		}
	}
	for _, c := range s.host.Network().Conns() { // connections made before Open
		s.onConnected(c)
	}
	s.log.Info("swarm open", "peer", s.host.ID(), "swarm", s.cfg.Name, "private", s.cfg.PSK != nil,
		"addrs", s.Addrs())
	return nil
}

func (s *Swarm) goLoop(f func(ctx context.Context)) {
	s.wg.Go(func() { f(s.ctx) })
}

// Close shuts down in order (provider, DHT, pubsub, host); idempotent:
// a second call returns ErrClosed.
func (s *Swarm) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state.Swap(2) {
	case 2:
		return ErrClosed
	case 0:
		return nil
	}
	return s.shutdown()
}

// shutdown releases whatever Open built, in reverse order.
func (s *Swarm) shutdown() error {
	s.state.Store(2)
	s.hmu.Lock()
	s.closing = true
	s.hmu.Unlock()
	s.cancel(ErrClosed)
	var errs []error
	if s.mdns != nil {
		errs = append(errs, s.mdns.Close())
	}
	if s.host != nil {
		s.host.RemoveStreamHandler(ProtocolSync)
		s.host.RemoveStreamHandler(ProtocolFetch)
		s.host.RemoveStreamHandler(ProtocolPair)
	}
	s.wg.Wait()       // publisher, readers, scheduler and its sessions, provider, dialers
	s.handlers.Wait() // sessions and fetches peers started
	if s.dht != nil {
		errs = append(errs, s.dht.Close())
	}
	if s.sub != nil {
		s.sub.Cancel()
	}
	if s.topic != nil {
		_ = s.topic.Close()
	}
	if s.psCancel != nil {
		s.psCancel()
	}
	if s.host != nil && s.notifee != nil {
		s.host.Network().StopNotify(s.notifee)
	}
	if s.ownHost && s.host != nil {
		errs = append(errs, s.host.Close())
	}
	if s.metRegistered {
		s.met.unregister(s.cfg.Registerer)
	}
	return errors.Join(errs...)
}

func (s *Swarm) isOpen() bool { return s.state.Load() == 1 }

// enterHandler counts a stream handler in; false once Close has begun.
// bounded makes a handler for a one-request stream protocol: Close waits
// for it, and the stream is reset when the swarm closes or timeout passes.
func (s *Swarm) bounded(timeout time.Duration, serve func(context.Context, network.Stream)) network.StreamHandler {
	return func(st network.Stream) {
		if !s.enterHandler() {
			_ = st.Reset()
			return
		}
		defer s.handlers.Done()
		ctx, cancel := context.WithTimeout(s.ctx, timeout)
		defer cancel()
		stop := context.AfterFunc(ctx, func() { _ = st.Reset() })
		defer stop()
		_ = st.SetDeadline(time.Now().Add(timeout))
		serve(ctx, st)
	}
}

func (s *Swarm) enterHandler() bool {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	if s.closing {
		return false
	}
	s.handlers.Add(1)
	return true
}

// Publish queues claims the node stored from a local writer for gossip
// (batched by a few ms or by size). It never blocks: when the queue is
// full the claims are dropped from gossip (sync still carries them).
func (s *Swarm) Publish(claims []store.Claim) {
	if !s.isOpen() || len(claims) == 0 {
		return
	}
	select {
	case s.pubCh <- claims:
	default:
		s.met.publishDropped.Add(float64(len(claims)))
	}
}

// Provide queues cids to announce in the DHT (batched, rate-bounded).
func (s *Swarm) Provide(cids ...string) {
	if !s.isOpen() || len(cids) == 0 {
		return
	}
	s.provQueue.push(cids)
	select {
	case s.provideCh <- struct{}{}:
	default:
	}
}

// Resync forgets the claims refused earlier whose signers are trusted now
// and reconciles with every connected peer again (after a trust change).
func (s *Swarm) Resync() {
	if !s.isOpen() {
		return
	}
	s.refused.forget(s.cfg.Store.Trusted)
	select {
	case s.resyncCh <- struct{}{}:
	default:
	}
}

// Connect dials a peer by multiaddr (with /p2p/).
func (s *Swarm) Connect(ctx context.Context, addr string) error {
	if !s.isOpen() {
		return errNotOpen
	}
	ai, err := peer.AddrInfoFromString(addr)
	if err != nil {
		return fmt.Errorf("connect %s: %w", addr, err)
	}
	if err := s.dial(ctx, *ai); err != nil {
		return fmt.Errorf("connect %s: %w", addr, err)
	}
	return nil
}

// PeerID returns this node's peer id (valid after Open).
func (s *Swarm) PeerID() string {
	if s.host == nil {
		return ""
	}
	return s.host.ID().String()
}

// Host returns the libp2p host (valid after Open); tests and the benchmark
// use it to connect nodes.
func (s *Swarm) Host() host.Host { return s.host }

// Addrs returns this node's listen addresses with /p2p/<peerId>.
func (s *Swarm) Addrs() []string {
	if s.host == nil {
		return nil
	}
	var out []string
	for _, a := range s.host.Addrs() {
		out = append(out, a.String()+"/p2p/"+s.host.ID().String())
	}
	return out
}

func parseAddrInfos(addrs []string) ([]peer.AddrInfo, error) {
	var out []peer.AddrInfo
	at := map[peer.ID]int{}
	for _, a := range addrs {
		ai, err := peer.AddrInfoFromString(a)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", a, err)
		}
		// One entry per peer: a bootstrap node listed by its IPv4 and its
		// IPv6 address is one peer to dial, protect and count (review s12 E4).
		if i, ok := at[ai.ID]; ok {
			out[i].Addrs = append(out[i].Addrs, ai.Addrs...)
			continue
		}
		at[ai.ID] = len(out)
		out = append(out, *ai)
	}
	return out, nil
}
