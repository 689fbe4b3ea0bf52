package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/store"
)

// testWriter sends log lines to t.Log until the test's cleanup has run.
type testWriter struct {
	t    testing.TB
	done atomic.Bool
	mu   sync.Mutex
}

func (w *testWriter) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.mu.Lock()
		w.t.Log(string(p[:len(p)-1]))
		w.mu.Unlock()
	}
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testConfig is a node on loopback only: free ports, no mDNS.
func testConfig(t testing.TB, dir string) node.Config {
	return node.Config{
		DataDir:      dir,
		HTTPAddr:     "127.0.0.1:0",
		Listen:       []string{"/ip4/127.0.0.1/tcp/0"},
		DHTServer:    true,
		SyncInterval: time.Second,
		Logger:       testLogger(t),
	}
}

// openNode opens a node and closes it when the test ends.
func openNode(t testing.TB, cfg node.Config) *node.Node {
	t.Helper()
	n := openNodeNoCleanup(t, cfg)
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close node: %v", err)
		}
	})
	return n
}

// joinHome opens a node on cfg that bootstraps to a, and has the two trust
// each other's node uid (pairing by hand).
func joinHome(t *testing.T, a *node.Node, cfg node.Config) *node.Node {
	t.Helper()
	cfg.Bootstrap = a.Addrs()[:1]
	b := openNode(t, cfg)
	ctx := context.Background()
	if err := a.Trust(ctx, b.UID()); err != nil {
		t.Fatal(err)
	}
	if err := b.Trust(ctx, a.UID()); err != nil {
		t.Fatal(err)
	}
	return b
}

// openNodeNoCleanup opens a node the caller closes.
func openNodeNoCleanup(t testing.TB, cfg node.Config) *node.Node {
	t.Helper()
	n := node.New(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.Open(ctx); err != nil {
		t.Fatalf("open node: %v", err)
	}
	return n
}

// waitFor polls cond every 50ms for at most d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, %s: %v", d, what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func signer(t testing.TB) *store.Signer {
	t.Helper()
	s, err := store.GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func nowMS() uint64 { return uint64(time.Now().UnixMilli()) }

// testCID is a valid cid for test i.
func testCID(i int) string {
	return store.MidhashCID(fmt.Appendf(make([]byte, 0, 32), "%032d", i))
}

func hasField(ctx context.Context, st *store.Store, cid, key, want string) error {
	rec, err := st.Record(ctx, cid, "")
	if err != nil {
		return err
	}
	if got := rec.Fields[key]; got != want {
		return fmt.Errorf("%s = %q, want %q", key, got, want)
	}
	return nil
}

var errNo = errors.New("not yet")

func dataDir(t testing.TB, name string) string { return filepath.Join(t.TempDir(), name) }
