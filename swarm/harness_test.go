package swarm_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gocid "github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"
	mh "github.com/multiformats/go-multihash"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
	"github.com/metanode/metanode/swarm"
)

// testLog returns a logger writing to t.Log until the test ends (libp2p
// goroutines may log while winding down; those lines are dropped).
func testLog(t testing.TB) *slog.Logger {
	w := &tWriter{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	level := slog.LevelWarn
	if os.Getenv("SWARM_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

type tWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *tWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

var _ io.Writer = (*tWriter)(nil)

// node is one metanode's store and swarm.
type node struct {
	st     *store.Store
	sw     *swarm.Swarm
	signer *store.Signer // the node identity
	id     peer.ID
}

type nodeOpt struct {
	trust  store.TrustMode // default open
	mn     mocknet.Mocknet // nil: a real host on loopback
	psk    []byte
	swarm  func(*swarm.Config)
	noOpen bool
}

var mockAddrs struct {
	mu sync.Mutex
	n  int
}

func openStore(t testing.TB, trust store.TrustMode, own string) *store.Store {
	t.Helper()
	return storetest.Open(t, store.Config{Trust: trust, OwnUID: own, Logger: testLog(t)})
}

func newNode(t testing.TB, o nodeOpt) *node {
	t.Helper()
	signer, err := store.GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	n := &node{signer: signer}
	n.st = openStore(t, o.trust, signer.UID())
	if n.id, err = swarm.PeerIDOf(signer); err != nil {
		t.Fatal(err)
	}
	cfg := swarm.Config{
		Identity:     signer,
		Store:        n.st,
		Name:         "test",
		PSK:          o.psk,
		SyncInterval: time.Hour, // tests start sessions on connect or explicitly
		Logger:       testLog(t),
	}
	if o.mn != nil {
		sk, err := swarm.PeerKey(signer)
		if err != nil {
			t.Fatal(err)
		}
		mockAddrs.mu.Lock()
		mockAddrs.n++
		addr := ma.StringCast(fmt.Sprintf("/ip4/10.0.%d.%d/tcp/4001", mockAddrs.n/250, mockAddrs.n%250+1))
		mockAddrs.mu.Unlock()
		if cfg.Host, err = o.mn.AddPeer(sk, addr); err != nil {
			t.Fatal(err)
		}
	} else {
		cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	}
	if o.swarm != nil {
		o.swarm(&cfg)
	}
	n.sw = swarm.New(cfg)
	if !o.noOpen {
		n.open(t)
	}
	return n
}

func (n *node) open(t testing.TB) {
	t.Helper()
	if err := n.sw.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.sw.Close() })
}

// newMocknet returns a mocknet closed at the end of the test, after the
// swarms on it (cleanups run last-in first-out).
func newMocknet(t testing.TB) mocknet.Mocknet {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	return mn
}

// attackerOf adds a bare mocknet host (no metanode behind it) connected to
// victim, for tests that write raw streams.
func attackerOf(t testing.TB, mn mocknet.Mocknet, victim *node) host.Host {
	t.Helper()
	h, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mn.LinkPeers(h.ID(), victim.id); err != nil {
		t.Fatal(err)
	}
	if _, err := mn.ConnectPeers(h.ID(), victim.id); err != nil {
		t.Fatal(err)
	}
	return h
}

// linkConnect links and connects two mocknet nodes.
func linkConnect(t testing.TB, mn mocknet.Mocknet, a, b *node) {
	t.Helper()
	if _, err := mn.LinkPeers(a.id, b.id); err != nil {
		t.Fatal(err)
	}
	if _, err := mn.ConnectPeers(a.id, b.id); err != nil {
		t.Fatal(err)
	}
}

// connect dials b from a over real loopback.
func connect(t testing.TB, a, b *node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.sw.Connect(ctx, b.sw.Addrs()[0]); err != nil {
		t.Fatal(err)
	}
}

// testCID returns a distinct valid cid for i.
func testCID(i int) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(i))
	sum := sha256.Sum256(b[:])
	m, _ := mh.Encode(sum[:], mh.SHA2_256)
	return gocid.NewCidV1(gocid.Raw, m).String()
}

// signMany signs n text claims in parallel: claim i is on testCID(base+i),
// key "title", at ts0+i.
func signMany(signer *store.Signer, base, n int, ts0 uint64) []store.Claim {
	out := make([]store.Claim, n)
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				out[i] = signer.Text(testCID(base+i), "title", fmt.Sprintf("title %d", base+i), ts0+uint64(i))
			}
		})
	}
	wg.Wait()
	return out
}

// submit stores claims as a local writer would and publishes them.
func (n *node) submit(t testing.TB, claims []store.Claim) {
	t.Helper()
	for chunk := range chunks(claims, 4096) {
		res, err := n.st.Submit(context.Background(), chunk, store.SubmitOptions{Origin: store.OriginLocal})
		if err != nil {
			t.Fatal(err)
		}
		var stored []store.Claim
		for i, r := range res {
			if r.Outcome == store.Rejected {
				t.Fatalf("claim %d rejected: %v", i, r.Err)
			}
			if r.Stored {
				stored = append(stored, chunk[i])
			}
		}
		n.sw.Publish(stored)
	}
}

func chunks[T any](s []T, n int) func(func([]T) bool) {
	return func(yield func([]T) bool) {
		for len(s) > 0 {
			k := min(n, len(s))
			if !yield(s[:k]) {
				return
			}
			s = s[k:]
		}
	}
}

// setOf returns the count and fingerprint of a node's whole sync set.
func (n *node) setOf() (int, store.Fingerprint) {
	<-n.st.SyncReady()
	acc := n.st.SyncSet().Summary(store.MinSyncItem, store.MaxSyncItem)
	return acc.Count(), acc.Fingerprint()
}

// waitFor polls cond every 20 ms for at most limit; a bounded wait, not a
// timing assertion.
func waitFor(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitSame waits until every node holds the same sync set of want items.
func waitSame(t testing.TB, limit time.Duration, want int, nodes ...*node) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			for i, n := range nodes {
				k, _ := n.setOf()
				t.Logf("node %d: %d claims, counters %+v", i, k, n.sw.Counters())
			}
		}
	})
	waitFor(t, limit, fmt.Sprintf("%d nodes to hold the same %d claims", len(nodes), want), func() bool {
		n0, fp0 := nodes[0].setOf()
		if n0 != want {
			return false
		}
		for _, n := range nodes[1:] {
			if k, fp := n.setOf(); k != want || fp != fp0 {
				return false
			}
		}
		return true
	})
}

// logCapture keeps what a node logs, for lines the test waits for.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logCapture) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func (l *logCapture) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// has reports whether one logged line holds every part.
func (l *logCapture) has(parts ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
			return true
		}
	}
	return false
}
