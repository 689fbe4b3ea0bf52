package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/node/beacon"
	"github.com/metanode/metanode/node/watcher"
	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

// ErrClosed is returned by a second Close, and by Open after Close.
var ErrClosed = errors.New("node closed")

// ErrDataDirInUse: another running node holds the data directory.
var ErrDataDirInUse = errors.New("another metanode is running on this data directory")

// Node is one running metanode: store, swarm, watcher and API.
type Node struct {
	cfg Config
	log *slog.Logger
	reg *prometheus.Registry

	identity *store.Signer
	peerCID  string        // store.PeerIDCID(uid): where this node's vouches live
	legacy   *store.Signer // signs legacy writes; nil when they are refused

	store   *store.Store
	swarm   *swarm.Swarm
	api     *api.Server
	watcher *watcher.Watcher // nil without a files root
	beacon  *beacon.Beacon   // nil unless Config.Beacon

	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	closers []namedCloser // in open order; closed in reverse
	ready   chan struct{}

	invMu sync.Mutex // serialises reads and writes of the invites file

	// joinMu guards join, the latest join from the owner's page (join.go);
	// taken before mu.
	joinMu sync.Mutex
	join   joinState

	// trustMu serialises the node's trust changes (trust add and rm, auto-
	// trust of local writers, pairing, reconcileTrust): each changes the
	// trust table and then signs a vouch, and the reconciliation must not see
	// half of one; a pairing must not trust a uid a trust rm is blocking.
	trustMu    sync.Mutex
	trustEvery time.Duration // reconcileTrust's period (trustCheckEvery)
	// clockAhead: uid -> ts of an own vouch claim too far ahead of the
	// clock to sign after yet, already logged (under trustMu).
	clockAhead map[string]uint64
	// newVouches: uid -> this node's vouch for a new local writer, for a
	// while after it was made: published again ahead of that writer's
	// claims by every write in that time (concurrent writes).
	newVouchMu sync.Mutex
	newVouches map[string]newVouch

	mu     sync.Mutex
	opened bool
	closed bool
	life   sync.Mutex // held by Open throughout, so Close waits for an Open it cancelled before releasing
}

type namedCloser struct {
	name  string
	close func() error
}

// New returns an unopened node; it does no I/O.
func New(cfg Config) *Node {
	cfg = cfg.withDefaults()
	return &Node{
		cfg:   cfg,
		log:   cfg.Logger.With("component", "node"),
		reg:   prometheus.NewRegistry(),
		ready: make(chan struct{}),

		trustEvery: trustCheckEvery,
		clockAhead: make(map[string]uint64),
		newVouches: make(map[string]newVouch),
	}
}

// Open loads (or makes) the identity and opens the store, the swarm, the
// watcher and the API, in that order. A failure closes what was opened.
// ctx bounds only Open; the node's loops run until Close.
func (n *Node) Open(ctx context.Context) (err error) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return ErrClosed
	}
	if n.opened {
		n.mu.Unlock()
		return errors.New("open node: already open")
	}
	n.opened = true
	n.ctx, n.cancel = context.WithCancelCause(context.Background())
	n.life.Lock() // before mu is let go: a Close from now on waits for this Open
	n.mu.Unlock()
	defer n.life.Unlock()
	// A Close while Open runs cancels the node's context: Open's steps
	// stop too, and Close releases what they opened once Open returns.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(n.ctx, stop)()
	defer func() {
		if err != nil {
			if n.ctx.Err() != nil { // Close cancelled it
				err = fmt.Errorf("open node: %w (%w)", ErrClosed, err)
			}
			n.release()
		}
	}()
	if n.cfg.DataDir != "" {
		if err := EnsureDataDir(n.cfg.DataDir); err != nil {
			return fmt.Errorf("open node: %w", err)
		}
		unlock, err := lockDataDir(n.cfg.DataDir)
		if err != nil {
			return fmt.Errorf("open node: %w", err)
		}
		n.addCloser("data directory lock", unlock)
	}
	// A truth database kept elsewhere (--truth-db) is guarded by a lock in
	// its own directory too: two nodes must never write one truth.
	if td := filepath.Dir(n.cfg.TruthPath); n.cfg.TruthPath != "" && !SameDir(td, n.cfg.DataDir) {
		unlock, err := lockDataDir(td)
		if err != nil {
			return fmt.Errorf("open node: truth database %s: %w", n.cfg.TruthPath, err)
		}
		n.addCloser("truth directory lock", unlock)
	}
	if err := n.openIdentity(); err != nil {
		return fmt.Errorf("open node: %w", err)
	}
	if err := n.openLegacyWriter(); err != nil {
		return fmt.Errorf("open node: %w", err)
	}
	n.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Each component names itself in its errors ("open swarm: …"). The
	// trust list is checked against the node's own vouches once the swarm
	// can publish a fix, before the API serves.
	opens := []func(context.Context) error{n.openStore, n.openSwarm, n.openTrustCheck, n.openWatcher, n.openAPI, n.openBeacon, n.openLeaderFile}
	if n.cfg.StoreOnly {
		opens = opens[:1]
	}
	for _, open := range opens {
		if err := open(ctx); err != nil {
			return err
		}
	}
	if !n.cfg.StoreOnly {
		n.wg.Go(n.watchTrust)
		n.wg.Go(n.watchDamage)
	}
	close(n.ready)
	n.log.Info("node open", "uid", n.identity.UID(), "peer", n.PeerID(), "api", n.APIURL())
	return nil
}

// hasData reports whether path is a non-empty file.
func hasData(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Size() > 0
}

func (n *Node) openIdentity() error {
	if n.cfg.KeyPath == "" {
		return errors.New("node identity: no data directory or key path")
	}
	id, created, err := LoadOrCreateIdentity(n.cfg.KeyPath)
	if err != nil {
		return err
	}
	switch {
	case created && hasData(n.cfg.TruthPath):
		// A truth restored without its key (operations.md backs up both):
		// the paired homes know the old uid, not this one.
		n.log.Warn("made a new node key next to an existing truth database: this node has a new uid, and homes paired with the old one will not trust it; "+
			"if you restored a backup, stop and restore node.key too (docs/operations.md, Restore)",
			"path", n.cfg.KeyPath, "uid", id.UID(), "truth", n.cfg.TruthPath)
	case created:
		n.log.Info("made a new node key", "path", n.cfg.KeyPath, "uid", id.UID())
	}
	cid, err := store.PeerIDCID(id.UID())
	if err != nil {
		return fmt.Errorf("node identity: %w", err)
	}
	n.identity, n.peerCID = id, cid
	return nil
}

func (n *Node) openStore(ctx context.Context) error {
	if n.cfg.TruthPath == "" || n.cfg.CachePath == "" {
		return errors.New("no data directory or database paths")
	}
	st := store.New(store.Config{
		TruthPath:  n.cfg.TruthPath,
		CachePath:  n.cfg.CachePath,
		Logger:     n.cfg.Logger,
		Registerer: n.reg,
		Trust:      n.cfg.Trust,
		OwnUID:     n.identity.UID(),
		Now:        n.cfg.Now,
		Scrub:      n.cfg.Scrub,
	})
	if err := st.Open(ctx); err != nil {
		return err
	}
	n.store = st
	n.addCloser("", st.Close) // "close store: …"
	return nil
}

func (n *Node) openSwarm(ctx context.Context) error {
	var psk []byte
	if n.cfg.SwarmKeyPath != "" {
		var err error
		if psk, err = ReadSwarmKey(n.cfg.SwarmKeyPath); err != nil {
			return err
		}
	}
	scfg := swarm.Config{
		Identity:      n.identity,
		Store:         n.swarmStore(),
		Listen:        n.cfg.Listen,
		Bootstrap:     n.cfg.Bootstrap,
		Name:          n.cfg.SwarmName,
		PSK:           psk,
		MDNS:          n.cfg.MDNS,
		DHTServer:     n.cfg.DHTServer,
		RelayService:  n.cfg.RelayService,
		PeerExchange:  n.cfg.PeerExchange,
		MaxConns:      n.cfg.MaxConns,
		Public:        n.cfg.Public,
		PortMap:       n.cfg.PortMap,
		Relays:        n.cfg.Relays,
		SyncInterval:  n.cfg.SyncInterval,
		LookupTimeout: n.cfg.LookupTimeout,
		Logger:        n.cfg.Logger,
		Registerer:    n.reg,
	}
	scfg.OnPair = n.answerPair
	n.configureInterest(&scfg)
	sw := swarm.New(scfg)
	if err := sw.Open(ctx); err != nil {
		return err
	}
	n.swarm = sw
	n.addCloser("swarm", sw.Close)
	return nil
}

// addCloser registers a component's Close; its errors get "close <name>: "
// unless name is "" (the component names itself in its Close errors).
func (n *Node) addCloser(name string, f func() error) {
	n.closers = append(n.closers, namedCloser{name, f})
}

// openTrustCheck reconciles the trust list with the node's own vouches
// (a restored backup). A failure does not stop the node: the periodic
// check tries again.
func (n *Node) openTrustCheck(ctx context.Context) error {
	n.checkTrust(ctx)
	return nil
}

// watchTrust re-syncs with peers whenever the effective trusted set changes
// (a trust command, or a vouch claim arriving): claims refused before may
// now be welcome. Then, and every trustEvery, it reconciles the trust list
// with the node's own vouches (reconcileTrust).
func (n *Node) watchTrust() {
	ch := n.store.TrustChanges()
	tick := time.NewTicker(n.trustEvery)
	defer tick.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case _, ok := <-ch:
			if !ok {
				return
			}
			n.swarm.Resync()
			n.checkTrust(n.ctx)
		case <-tick.C:
			n.checkTrust(n.ctx)
		}
	}
}

// Close stops the node: its own loop, then the API, watcher, swarm and store.
// A second call returns ErrClosed.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return ErrClosed
	}
	n.closed = true
	opened := n.opened
	n.mu.Unlock()
	if !opened {
		return nil
	}
	n.cancel(ErrClosed) // an Open still running stops
	n.life.Lock()
	defer n.life.Unlock()
	err := n.release()
	n.log.Info("node closed")
	return err
}

// release cancels the node's loop, waits for it and closes the components
// opened so far, newest first.
func (n *Node) release() error {
	n.cancel(ErrClosed)
	n.wg.Wait()
	var errs []error
	for i := len(n.closers) - 1; i >= 0; i-- {
		c := n.closers[i]
		if err := c.close(); err != nil {
			if c.name != "" {
				err = fmt.Errorf("close %s: %w", c.name, err)
			}
			errs = append(errs, err)
		}
	}
	n.closers = nil
	return errors.Join(errs...)
}

// Ready is closed once Open has succeeded and the API serves.
func (n *Node) Ready() <-chan struct{} { return n.ready }

// UID is the node's signer uid (valid after Open).
func (n *Node) UID() string {
	if n.identity == nil {
		return ""
	}
	return n.identity.UID()
}

// PeerID is the node's libp2p peer id (valid after Open).
func (n *Node) PeerID() string {
	if n.swarm == nil {
		return ""
	}
	return n.swarm.PeerID()
}

// Addrs are the swarm's listen addresses ending in /p2p/<peerId>.
func (n *Node) Addrs() []string {
	if n.swarm == nil {
		return nil
	}
	return n.swarm.Addrs()
}

// Store is the node's claims engine (valid after Open); tests and benchmarks
// read it directly.
func (n *Node) Store() *store.Store { return n.store }

// Registry is the node's metrics registry, served at /metrics.
func (n *Node) Registry() *prometheus.Registry { return n.reg }
