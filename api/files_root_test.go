package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/store"
)

// TestRegisterFile_RootMissing: while the files root itself is missing (a
// share not mounted, the root moved away) a register is 503
// storage_unavailable, retryable, saying so: the node cannot look, the
// file is not known to be missing. A missing file under a root that is
// there stays a 404.
func TestRegisterFile_RootMissing(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.root, "plugin/tmdb/poster.jpg"), "JFIF")
	e.sendJSON(http.MethodPost, "/api/files/register", map[string]string{"path": "plugin/missing.jpg"}).wantError(t, 404, "unknown_root")

	away := e.root + "-away"
	if err := os.Rename(e.root, away); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Rename(away, e.root) })
	for _, p := range []string{"plugin/tmdb/poster.jpg", "plugin/missing.jpg"} {
		a := e.sendJSON(http.MethodPost, "/api/files/register", map[string]string{"path": p})
		a.wantError(t, 503, "storage_unavailable")
		wantMessage(t, "register "+p, envelope(t, a).Message, "files root "+e.root+" is missing", "retry")
	}
	if _, err := e.c.RegisterFile(t.Context(), "plugin/tmdb/poster.jpg"); !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrNotFound) {
		t.Errorf("client: %v, want store.ErrUnavailable", err)
	}

	if err := os.Rename(away, e.root); err != nil {
		t.Fatal(err)
	}
	if a := e.sendJSON(http.MethodPost, "/api/files/register", map[string]string{"path": "plugin/tmdb/poster.jpg"}); a.status != http.StatusCreated {
		t.Errorf("register once the root is back: %d %s", a.status, a.body)
	}
	e.sendJSON(http.MethodPost, "/api/files/register", map[string]string{"path": "plugin/missing.jpg"}).wantError(t, 404, "unknown_root")
}

// emptyRootNode answers RegisterFile as the watcher does while its files
// root is empty and files are indexed (a share not mounted on it).
type emptyRootNode struct {
	*testNode
	calls atomic.Int64
}

func (n *emptyRootNode) RegisterFile(ctx context.Context, rel string) (api.RegisterResult, error) {
	n.calls.Add(1)
	return api.RegisterResult{}, fmt.Errorf("register %s: %w: files root %s is empty while 2 files are indexed (a share not mounted?); retry once it is mounted",
		rel, store.ErrUnavailable, n.root)
}

// TestRegisterFile_RootEmpty: a missing file under an empty files root is
// the node's to answer: 503 while it has files indexed there (the watcher
// waits for the share), 404 for an empty library. Under a root that has
// entries the node is not asked about a missing file.
func TestRegisterFile_RootEmpty(t *testing.T) {
	e := newEnv(t) // its root is empty, and its test node indexes nothing
	e.sendJSON(http.MethodPost, "/api/files/register", map[string]string{"path": "plugin/a.jpg"}).wantError(t, 404, "unknown_root")

	node := &emptyRootNode{testNode: e.node}
	srv := api.NewServer(api.Config{Addr: "127.0.0.1:0", FilesRoot: e.root, Logger: testLogger(t), Store: e.st, Node: node})
	if err := srv.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	g := *e
	g.url = srv.URL()
	a := g.sendJSON(http.MethodPost, "/api/files/register", map[string]string{"path": "plugin/a.jpg"})
	a.wantError(t, 503, "storage_unavailable")
	wantMessage(t, "register", envelope(t, a).Message, "is empty while 2 files are indexed")
	if n := node.calls.Load(); n != 1 {
		t.Errorf("node asked %d times, want 1", n)
	}

	writeFile(t, filepath.Join(e.root, "film.mkv"), "film") // not empty now
	g.sendJSON(http.MethodPost, "/api/files/register", map[string]string{"path": "plugin/a.jpg"}).wantError(t, 404, "unknown_root")
	if n := node.calls.Load(); n != 1 {
		t.Errorf("node asked %d times, want 1: a missing file under a root with entries is a 404", n)
	}
}
