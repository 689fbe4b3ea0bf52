package swarm

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	gocid "github.com/ipfs/go-cid"
	dht "github.com/libp2p/go-libp2p-kad-dht"
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
	)
	if err != nil {
		return fmt.Errorf("dht: %w", err)
	}
	s.dht = d
	return nil
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
