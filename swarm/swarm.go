package swarm

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/metanode/metanode/store"
)

// Store is the claims engine as the swarm uses it; *store.Store implements
// it (the node may wrap it, e.g. to filter by interest).
type Store interface {
	Submit(ctx context.Context, claims []store.Claim, opt store.SubmitOptions) ([]store.Result, error)
	Trusted(uid string) bool
	SyncSet() *store.SyncSet
	SyncReady() <-chan struct{}
	ClaimsByItems(ctx context.Context, items []store.SyncItem) ([]store.Claim, error)
	ClaimsInRange(ctx context.Context, lo, hi store.SyncItem, limit int) ([]store.Claim, error)
	FetchClaims(ctx context.Context, cid string) ([]store.Claim, error)
	CIDs(ctx context.Context, after string, limit int) ([]string, error)
}

var _ Store = (*store.Store)(nil)

var errNotImplemented = errors.New("not implemented")

// ErrNotFound: no peer knows the cid within the lookup's timeout.
var ErrNotFound = errors.New("no peer knows this cid")

// Defaults for Config fields left zero.
const (
	DefaultName         = "metamesh"
	DefaultMaxConns     = 64
	DefaultSyncInterval = 30 * time.Second
	DefaultLookup       = 5 * time.Second
)

// Config configures a Swarm. Zero fields take the documented defaults.
type Config struct {
	Identity *store.Signer // the node key: the peer id and the node uid both come from it
	Store    Store

	Listen    []string // multiaddrs; default TCP and QUIC on port 4001 (TCP only with a PSK)
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

	Logger     *slog.Logger
	Registerer prometheus.Registerer

	// Host, when set, is used instead of building one (tests pass mocknet
	// hosts). The swarm does not close a host it did not build.
	Host host.Host
}

// Swarm shares a node's claims with its peers: gossip, catch-up, lookups.
type Swarm struct {
	cfg Config
}

// New returns an unopened swarm; it does no I/O.
func New(cfg Config) *Swarm { return &Swarm{cfg: cfg} }

// Open starts the host, gossip, sync, DHT and discovery.
func (s *Swarm) Open(ctx context.Context) error { return errNotImplemented }

// Close shuts down in order (provider, DHT, pubsub, host); idempotent.
func (s *Swarm) Close() error { return errNotImplemented }

// Publish queues claims the node stored from a local writer for gossip
// (batched by a few ms or by size). It never blocks.
func (s *Swarm) Publish(claims []store.Claim) {}

// Provide queues cids to announce in the DHT (batched, rate-bounded).
func (s *Swarm) Provide(cids ...string) {}

// Lookup finds peers that hold claims about cid (DHT), fetches, verifies
// and stores the claims of its group, and returns how many were stored.
// ErrNotFound when no peer knows it within the lookup timeout.
func (s *Swarm) Lookup(ctx context.Context, cid string) (int, error) { return 0, errNotImplemented }

// Resync forgets claims refused earlier and reconciles with every
// connected peer again (after a trust change).
func (s *Swarm) Resync() {}

// Connect dials a peer by multiaddr (with /p2p/).
func (s *Swarm) Connect(ctx context.Context, addr string) error { return errNotImplemented }

// Status is a snapshot of the swarm's state.
type Status struct {
	PeerID       string
	Addrs        []string // with /p2p/<peerId>
	Name         string
	Private      bool
	Peers        int
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
func (s *Swarm) Status() Status { return Status{} }

// Peers lists connected peers.
func (s *Swarm) Peers() []PeerInfo { return nil }

// PeerID returns this node's peer id (valid after Open).
func (s *Swarm) PeerID() string { return "" }

// Addrs returns this node's listen addresses with /p2p/<peerId>.
func (s *Swarm) Addrs() []string { return nil }
