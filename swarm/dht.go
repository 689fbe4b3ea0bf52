package swarm

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	gocid "github.com/ipfs/go-cid"
	ds "github.com/ipfs/go-datastore"
	dssync "github.com/ipfs/go-datastore/sync"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p-kad-dht/records"
	"github.com/libp2p/go-libp2p/core/peer"
	mh "github.com/multiformats/go-multihash"
	"golang.org/x/time/rate"
)

const (
	dhtPrefix         = "/metanode"
	provideKeyPrefix  = "metanode/cid/2:"
	reprovideInterval = 22 * time.Hour // provider records live 48 h
	provideTimeout    = 30 * time.Second
	provideRetryMin   = 5 * time.Second
	provideRetryMax   = 5 * time.Minute
	cidsPage          = 1000
	maxProvideQueue   = 1 << 20
)

// provideKey is the DHT key of a cid in a swarm: a raw CIDv1 over SHA-256
// of "metanode/cid/2:" + swarm name + "/" + cid, so our records never mix
// with providers of the content itself, and the swarm name is the DHT
// namespace (cli.md): a node finds the holders of its own swarm name only.
func provideKey(swarm, cid string) gocid.Cid {
	sum := sha256.Sum256([]byte(provideKeyPrefix + swarm + "/" + cid))
	m, _ := mh.Encode(sum[:], mh.SHA2_256) // cannot fail for a known code and its length
	return gocid.NewCidV1(gocid.Raw, m)
}

// openDHT starts kad-dht under our own protocol prefix: server mode on
// bootstrap nodes and in private swarms (auto mode never forms a DHT where
// nobody is publicly reachable), auto-server elsewhere.
func (s *Swarm) openDHT() error {
	mode := dht.ModeAutoServer
	if s.cfg.DHTServer || s.cfg.PSK != nil {
		mode = dht.ModeServer
	}
	d, err := dht.New(s.host,
		dht.Mode(mode),
		dht.ProtocolPrefix(dhtPrefix),
		dht.DisableValues(),
		dht.BootstrapPeers(s.bootstrap...),
		dht.ProviderDatastore(newBoundedProviders(s.host.ID(), maxProviderRecords, maxProviderRecordsPerPeer, s.log)),
		dht.ProviderManagerOpts(records.Cache(newProviderCache(providerCacheKeys, providerCacheTTL))),
	)
	if err != nil {
		return fmt.Errorf("dht: %w", err)
	}
	s.dht = d
	return nil
}

// Provider records this node keeps for other peers (DHT server mode).
// kad-dht stores a record for any key a peer announces itself for and
// keeps it 48 h, with no bound of its own: about 280 B each in memory, so
// one peer's ADD_PROVIDER flood would grow the heap without limit. A home
// providing a big library to a small swarm may see some of its records
// refused by a full server; its lookups then fall back on connected peers.
const (
	maxProviderRecords        = 1 << 17 // in all: about 37 MB at most
	maxProviderRecordsPerPeer = 1 << 14 // from one provider peer id
)

// boundedProviders is the DHT's provider datastore: kad-dht's default
// in-memory map with a bound on records in total and per provider peer
// (the last segment of the key /providers/<key>/<peer>). A new record past
// a peer's bound is dropped silently (an error would make kad-dht buffer
// and retry it). When the whole table is full, a new record of a peer that
// holds fewer than the biggest holder takes the place of one of the
// biggest holder's records: the first peers to fill the table (8 throwaway
// ids would do) cannot lock everyone else out until their records expire.
// A refreshed record (the same key) always goes through, and records the
// DHT deletes (expired) free their room. This node's own records are not
// counted: they are as many as the cids it holds.
type boundedProviders struct {
	ds.Batching
	self         string // this node's peer id as it appears in keys
	log          *slog.Logger
	max, perPeer int
	mu           sync.Mutex
	total        int
	peers        map[string]int
	keys         map[string]map[ds.Key]struct{} // each peer's records, for eviction
	dropped      atomic.Int64
}

// b32 encodes peer ids as kad-dht's provider keys do.
var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

func newBoundedProviders(self peer.ID, max, perPeer int, log *slog.Logger) *boundedProviders {
	return &boundedProviders{
		Batching: dssync.MutexWrap(ds.NewMapDatastore()),
		self:     b32.EncodeToString([]byte(self)),
		log:      log, max: max, perPeer: perPeer,
		peers: map[string]int{},
		keys:  map[string]map[ds.Key]struct{}{},
	}
}

func (b *boundedProviders) Put(ctx context.Context, k ds.Key, v []byte) error {
	p := k.BaseNamespace()
	if p == b.self {
		return b.Batching.Put(ctx, k, v)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	has, err := b.Batching.Has(ctx, k)
	if err != nil {
		return err
	}
	if !has {
		if b.total >= b.max && b.peers[p] < b.perPeer {
			if err := b.evictFromBiggest(ctx, p); err != nil {
				return err
			}
		}
		if b.total >= b.max || b.peers[p] >= b.perPeer {
			if b.dropped.Add(1) == 1 {
				b.log.Warn("DHT provider records past their bound are dropped",
					"total", b.total, "max", b.max, "per_peer", b.perPeer)
			}
			return nil
		}
		b.total++
		b.peers[p]++
		if b.keys[p] == nil {
			b.keys[p] = map[ds.Key]struct{}{}
		}
		b.keys[p][k] = struct{}{}
	}
	return b.Batching.Put(ctx, k, v)
}

// evictFromBiggest makes room for a record of p by deleting one record of
// the peer holding the most, if that peer holds more than p would.
func (b *boundedProviders) evictFromBiggest(ctx context.Context, p string) error {
	big, n := "", 0
	for q, c := range b.peers {
		if c > n {
			big, n = q, c
		}
	}
	if big == "" || n <= b.peers[p]+1 {
		return nil
	}
	for k := range b.keys[big] {
		if err := b.Batching.Delete(ctx, k); err != nil {
			return err
		}
		b.forget(big, k)
		return nil
	}
	return nil
}

// forget drops k of peer p from the counts (under mu).
func (b *boundedProviders) forget(p string, k ds.Key) {
	b.total--
	delete(b.keys[p], k)
	if b.peers[p]--; b.peers[p] <= 0 {
		delete(b.peers, p)
		delete(b.keys, p)
	}
}

func (b *boundedProviders) Delete(ctx context.Context, k ds.Key) error {
	p := k.BaseNamespace()
	if p == b.self {
		return b.Batching.Delete(ctx, k)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if has, err := b.Batching.Has(ctx, k); err == nil && has {
		b.forget(p, k)
	}
	return b.Batching.Delete(ctx, k)
}

// Batch applies its writes through Put and Delete, so they are bounded too.
func (b *boundedProviders) Batch(context.Context) (ds.Batch, error) {
	return ds.NewBasicBatch(b), nil
}

// counts reports the records held for other peers, in all and from p.
func (b *boundedProviders) counts(p peer.ID) (total, fromP int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total, b.peers[b32.EncodeToString([]byte(p))]
}

// provideQueue holds cids waiting to be provided, without repeats.
type provideQueue struct {
	mu    sync.Mutex
	queue []string
	in    map[string]struct{}
}

func (q *provideQueue) push(cids []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.in == nil {
		q.in = map[string]struct{}{}
	}
	for _, c := range cids {
		if _, ok := q.in[c]; ok || len(q.queue) >= maxProvideQueue {
			continue
		}
		q.in[c] = struct{}{}
		q.queue = append(q.queue, c)
	}
}

func (q *provideQueue) pop() (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) == 0 {
		return "", false
	}
	c := q.queue[0]
	q.queue = q.queue[1:]
	delete(q.in, c)
	return c, true
}

func (q *provideQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// runProvider announces cids in the DHT at most ProvidePerHr times an
// hour: new cids from Provide first, then a walk over every cid the store
// holds claims for, started again every reprovideInterval so records are
// renewed before they expire. A failed provide (no DHT peers yet) is
// retried with backoff.
func (s *Swarm) runProvider(ctx context.Context) {
	if s.dht == nil {
		return
	}
	lim := rate.NewLimiter(rate.Limit(float64(s.cfg.ProvidePerHr)/3600), min(s.cfg.ProvidePerHr, 100))
	var (
		walkAfter  string    // cursor of the walk over the store's cids
		walking    = true    // a walk is in progress
		walkStart  time.Time // when the current walk started
		walkBuf    []string
		retryDelay time.Duration
	)
	walkStart = time.Now()
	next := func() (string, bool) {
		if c, ok := s.provQueue.pop(); ok {
			return c, true
		}
		if !walking {
			if time.Since(walkStart) < reprovideInterval {
				return "", false
			}
			walking, walkAfter, walkStart = true, "", time.Now()
		}
		if len(walkBuf) == 0 {
			page, err := s.cfg.Store.CIDs(ctx, walkAfter, cidsPage)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("list cids to provide", "err", err)
				}
				return "", false
			}
			if len(page) == 0 {
				walking = false
				return "", false
			}
			walkBuf, walkAfter = page, page[len(page)-1]
		}
		c := walkBuf[0]
		walkBuf = walkBuf[1:]
		return c, true
	}
	idle := time.NewTicker(time.Minute)
	defer idle.Stop()
	for {
		c, ok := next()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-s.provideCh:
			case <-idle.C:
			}
			continue
		}
		if err := lim.Wait(ctx); err != nil {
			return
		}
		pctx, cancel := context.WithTimeout(ctx, provideTimeout)
		err := s.dht.Provide(pctx, provideKey(s.cfg.Name, c), true)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			retryDelay = 0
			s.counters.provided.Add(1)
			s.met.provides.WithLabelValues("ok").Inc()
			continue
		}
		s.met.provides.WithLabelValues("error").Inc()
		s.provQueue.push([]string{c}) // try again later, after newer cids
		retryDelay = min(max(2*retryDelay, provideRetryMin), provideRetryMax)
		s.log.Debug("provide failed", "cid", c, "retry_in", retryDelay, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retryDelay):
		}
	}
}
