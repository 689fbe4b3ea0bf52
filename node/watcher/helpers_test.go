package watcher_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/metanode/metanode/node/watcher"
	"github.com/metanode/metanode/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memStore keeps local_file rows in memory and records every update, so
// tests can assert the exact operations. It applies a batch all or nothing,
// as the store's transaction does.
type memStore struct {
	mu      sync.Mutex
	rows    map[string]store.LocalFile // abs path → row
	rids    map[string]string          // cid → rid
	updates []store.FileUpdate
	fail    int // fail this many ApplyFiles calls
	calls   int
}

func newMemStore() *memStore {
	return &memStore{rows: map[string]store.LocalFile{}, rids: map[string]string{}}
}

var errInjected = errors.New("injected store failure")

func (m *memStore) ApplyFiles(ctx context.Context, ups []store.FileUpdate) ([]store.FileResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.fail > 0 {
		m.fail--
		return nil, errInjected
	}
	out := make([]store.FileResult, len(ups))
	for i, u := range ups {
		var res store.FileResult
		switch u.Op {
		case store.FileAdd, store.FileChange, store.FileRename:
			if u.Op == store.FileRename {
				delete(m.rows, u.OldPath)
			}
			old, had := m.rows[u.File.Path]
			m.rows[u.File.Path] = u.File
			rid, ok := m.rids[u.File.CID]
			if !ok {
				rid = fmt.Sprintf("R%04d", len(m.rids))
				m.rids[u.File.CID] = rid
			}
			res = store.FileResult{RID: rid, Created: !had || old.CID != u.File.CID}
		case store.FileDelete:
			delete(m.rows, u.File.Path)
		case store.FileReset:
			clear(m.rows)
		default:
			return nil, fmt.Errorf("bad op %q", u.Op)
		}
		out[i] = res
	}
	m.updates = append(m.updates, ups...)
	return out, nil
}

func (m *memStore) LocalFiles(ctx context.Context) ([]store.LocalFile, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.LocalFile
	for _, r := range m.rows {
		out = append(out, r)
	}
	return out, nil
}

func (m *memStore) Resolve(ctx context.Context, h string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rid, ok := m.rids[h]; ok {
		return rid, nil
	}
	return "", store.ErrNotFound
}

func (m *memStore) failNext(n int) {
	m.mu.Lock()
	m.fail = n
	m.mu.Unlock()
}

// row returns the row at an absolute path.
func (m *memStore) row(p string) (store.LocalFile, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.rows[p]
	return r, ok
}

// paths lists the rows' paths, sorted.
func (m *memStore) paths() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for p := range m.rows {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// ops renders the updates since mark as "op path" / "rename old>new".
func (m *memStore) ops(mark int) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, u := range m.updates[mark:] {
		if u.Op == store.FileRename {
			out = append(out, fmt.Sprintf("rename %s>%s", u.EventOld, u.EventPath))
		} else {
			out = append(out, fmt.Sprintf("%s %s", u.Op, u.EventPath))
		}
	}
	return out
}

func (m *memStore) mark() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.updates)
}

// testLogger sends the watcher's log to t.Log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// renameDebounce is for tests that pair renames: the window for the second
// inotify event of a move is one debounce.
func renameDebounce(c *watcher.Config) { c.Debounce = 150 * time.Millisecond }

// open starts a watcher on root with short timings and waits for Ready.
func open(t *testing.T, root string, st watcher.Store, mod ...func(*watcher.Config)) *watcher.Watcher {
	t.Helper()
	cfg := watcher.Config{
		Root:     root,
		Store:    st,
		Logger:   testLogger(t),
		Debounce: 20 * time.Millisecond,
		Rescan:   -1,
	}
	for _, f := range mod {
		f(&cfg)
	}
	w := watcher.New(cfg)
	if err := w.Open(t.Context()); err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil && !errors.Is(err, watcher.ErrClosed) {
			t.Errorf("close: %v", err)
		}
	})
	select {
	case <-w.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("initial scan did not finish")
	}
	return w
}

// waitFor polls cond (bounded) until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// writeFile writes data at root/rel (making directories) and sets its mtime,
// so tests never depend on the clock's granularity. The file appears whole,
// by a rename from a hidden temp file: a slow machine must not let the
// watcher see it half written (it would, correctly, report it twice).
func writeFile(t *testing.T, root, rel string, data []byte, mtime time.Time) string {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(p), ".tmp-"+filepath.Base(p))
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// midhash is the expected cid of data (through the store's function).
func midhash(t *testing.T, p string) string {
	t.Helper()
	c, _, err := store.Midhash256File(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// t0 is a fixed mtime base; each file gets its own offset.
var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func at(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }

func diffStrings(got, want []string) string {
	if slices.Equal(got, want) {
		return ""
	}
	return fmt.Sprintf("got  %q\nwant %q", got, want)
}
