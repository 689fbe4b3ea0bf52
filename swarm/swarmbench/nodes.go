package swarmbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

// node is one benchmark node: a real store in the run's directory and a
// swarm on a loopback TCP port.
type node struct {
	st     *store.Store
	ts     *timedStore
	sw     *swarm.Swarm
	signer *store.Signer
	id     peer.ID
	opened time.Time
}

func (b *bench) newNode(ctx context.Context, bootstrap []string, rec *latencies) (*node, error) {
	b.seq++
	dir := filepath.Join(b.dir, fmt.Sprintf("node%d", b.seq))
	signer, err := store.GenerateSigner()
	if err != nil {
		return nil, err
	}
	st := store.New(store.Config{
		TruthPath: filepath.Join(dir, "truth.db"), CachePath: filepath.Join(dir, "cache.db"),
		Trust: store.TrustOpen, OwnUID: signer.UID(), Logger: b.o.Logger,
	})
	if err := st.Open(ctx); err != nil {
		return nil, fmt.Errorf("bench swarm: open store: %w", err)
	}
	n := &node{st: st, ts: &timedStore{Store: st, rec: rec}, signer: signer}
	n.sw = swarm.New(swarm.Config{
		Identity: signer, Store: n.ts, Name: "bench",
		Listen:       []string{"/ip4/127.0.0.1/tcp/0"},
		Bootstrap:    bootstrap,
		SyncInterval: time.Hour, // sessions come from connections and the benchmark
		Logger:       b.o.Logger,
	})
	n.opened = time.Now()
	if err := n.sw.Open(ctx); err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("bench swarm: open node: %w", err)
	}
	if n.id, err = peer.Decode(n.sw.PeerID()); err != nil {
		n.close()
		return nil, err
	}
	b.nodes = append(b.nodes, n)
	return n, nil
}

// reopen replaces n's swarm by one that starts no session by itself, on
// the same store and key.
func (b *bench) reopen(ctx context.Context, n *node) error {
	if err := n.sw.Close(); err != nil {
		return fmt.Errorf("bench swarm: close node: %w", err)
	}
	n.sw = swarm.New(swarm.Config{
		Identity: n.signer, Store: n.ts, Name: "bench",
		Listen: []string{"/ip4/127.0.0.1/tcp/0"}, NoAutoSync: true, Logger: b.o.Logger,
	})
	if err := n.sw.Open(ctx); err != nil {
		return fmt.Errorf("bench swarm: reopen node: %w", err)
	}
	return nil
}

func (n *node) close() {
	_ = n.sw.Close()
	_ = n.st.Close()
}

func (n *node) count() int {
	<-n.st.SyncReady()
	return n.st.SyncSet().Len()
}

// waitCount polls until n holds want claims (at most limit).
func waitCount(ctx context.Context, n *node, want int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for n.count() < want {
		if time.Now().After(deadline) {
			return fmt.Errorf("bench swarm: node holds %d of %d claims after %s", n.count(), want, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// timedStore is the node's real store, timing when gossiped claims are
// committed: the latency from publish to commit on every node.
type timedStore struct {
	*store.Store
	rec *latencies
}

func (s *timedStore) Submit(ctx context.Context, claims []store.Claim, opt store.SubmitOptions) ([]store.Result, error) {
	t0 := time.Now()
	res, err := s.Store.Submit(ctx, claims, opt)
	if rec := s.rec; rec != nil && err == nil && opt.Origin == store.OriginPeer {
		now := time.Now()
		rec.submitted(now.Sub(t0))
		for _, r := range res {
			if r.Stored {
				rec.arrived(r.ID, now)
			}
		}
	}
	return res, err
}

// latencies holds publish times and the delays observed.
type latencies struct {
	mu        sync.Mutex
	published map[store.ID]time.Time
	delays    []time.Duration
	submits   []time.Duration // how long the store's Submit of gossip took
}

func (l *latencies) submitted(d time.Duration) {
	l.mu.Lock()
	l.submits = append(l.submits, d)
	l.mu.Unlock()
}

func (l *latencies) publish(id store.ID, at time.Time) {
	l.mu.Lock()
	l.published[id] = at
	l.mu.Unlock()
}

func (l *latencies) arrived(id store.ID, at time.Time) {
	l.mu.Lock()
	if t0, ok := l.published[id]; ok {
		l.delays = append(l.delays, at.Sub(t0))
	}
	l.mu.Unlock()
}

func (l *latencies) quantile(q float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return quantile(l.delays, q)
}

func (l *latencies) submitQuantile(q float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return quantile(l.submits, q)
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	d := slices.Clone(ds)
	slices.Sort(d)
	return d[min(len(d)-1, int(q*float64(len(d))))]
}

// live starts Nodes nodes, connects each to three others (a mesh of
// degree about six), then writes Rate claims per second for Duration on
// random nodes and measures the delay from publish to commit on every
// other node, and the gossip bytes each node receives per claim.
func (b *bench) live(ctx context.Context) error {
	rec := &latencies{published: map[store.ID]time.Time{}}
	nodes := make([]*node, b.o.Nodes)
	for i := range nodes {
		n, err := b.newNode(ctx, nil, rec)
		if err != nil {
			return err
		}
		nodes[i] = n
	}
	for i, n := range nodes {
		for _, k := range []int{1, 2, 5} {
			if k >= len(nodes) {
				continue
			}
			m := nodes[(i+k)%len(nodes)]
			if err := n.sw.Connect(ctx, m.sw.Addrs()[0]); err != nil {
				return fmt.Errorf("bench swarm: connect: %w", err)
			}
		}
	}
	// Wait for the gossip meshes (grafts happen at the 1 s heartbeat; the
	// swarm keeps at least 2 mesh peers when it can) and for the sessions
	// the connections started.
	deadline := time.Now().Add(30 * time.Second)
	for slices.ContainsFunc(nodes, func(n *node) bool {
		return len(n.sw.MeshPeers()) < min(2, len(n.sw.Host().Network().Peers()))
	}) {
		if time.Now().After(deadline) {
			return fmt.Errorf("bench swarm: gossip meshes did not form")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	before := make([]swarm.Counters, len(nodes))
	for i, n := range nodes {
		before[i] = n.sw.Counters()
	}
	signer, err := store.GenerateSigner()
	if err != nil {
		return err
	}
	total := int(float64(b.o.Rate) * b.o.Duration.Seconds())
	claims := b.diffClaims(signer, total, uint64(time.Now().UnixMilli())-uint64(total)-1000, false)
	var wireBytes int
	for i := range claims {
		wireBytes += len(claims[i].Wire())
	}
	cpu0 := cpuTime()
	tick := time.NewTicker(time.Second / time.Duration(b.o.Rate))
	defer tick.Stop()
	for i := range claims {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		n := nodes[rand.IntN(len(nodes))]
		c := claims[i : i+1]
		res, err := n.st.Submit(ctx, c, store.SubmitOptions{Verified: true})
		if err != nil {
			return err
		}
		rec.publish(res[0].ID, time.Now())
		n.sw.Publish(c)
	}
	for _, n := range nodes {
		if err := waitCount(ctx, n, total, time.Minute); err != nil {
			return err
		}
	}
	cpu := (cpuTime() - cpu0).Seconds()
	var gossipBytes, dataBytes, viaGossip, msgs int64
	for i, n := range nodes {
		c := n.sw.Counters()
		gossipBytes += c.GossipRPCBytes - before[i].GossipRPCBytes
		dataBytes += c.GossipDataBytes - before[i].GossipDataBytes
		viaGossip += c.GossipStored - before[i].GossipStored
		msgs += c.GossipMessages - before[i].GossipMessages
	}
	perNode := float64(len(nodes) - 1)
	if cpu > 0 {
		// Where the latency goes on a small machine: every node shares its
		// cores, and each commit waits for the disk.
		b.printf("live propagation: %.2f ms of CPU per claim for the whole swarm (%.0f%% of %d cores at this rate); the store's Submit of gossip took p50 %s, p99 %s\n",
			cpu/float64(total)*1e3, cpu/b.o.Duration.Seconds()/float64(runtime.GOMAXPROCS(0))*100, runtime.GOMAXPROCS(0),
			rec.submitQuantile(0.5).Round(10*time.Microsecond), rec.submitQuantile(0.99).Round(10*time.Microsecond))
	}
	meanWire := float64(wireBytes) / float64(total)
	b.printf("live propagation, %d nodes, %d claims/s for %s: publish to commit p50 %s, p99 %s (goal p99 < 100ms); %d of %d arrivals by gossip; load %s\n",
		len(nodes), b.o.Rate, b.o.Duration, rec.quantile(0.5).Round(10*time.Microsecond), rec.quantile(0.99).Round(10*time.Microsecond),
		viaGossip, int64(total)*int64(len(nodes)-1), loadAvg())
	b.printf("live propagation: gossip received per claim per node %.0f B in all (%.0f B of topic messages) = %.2f copies of the %.0f B claim (goal <= 4); %.2f messages per claim per node\n",
		float64(gossipBytes)/float64(total)/perNode, float64(dataBytes)/float64(total)/perNode,
		float64(dataBytes)/float64(total)/perNode/meanWire, meanWire, float64(msgs)/float64(total)/perNode)
	return nil
}
