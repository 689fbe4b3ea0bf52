package node_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNode_HealthFilesRootMissing: while the files root is moved away the
// node is degraded with the watcher check saying why, and ok again once
// it is back (probe r_api3 F5: /health said ok while nothing was indexed).
func TestNode_HealthFilesRootMissing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root := filepath.Join(dir, "media")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, dataDir(t, "home"))
	cfg.FilesRoot = root
	n := openNode(t, cfg)
	health := func(status string, watcher func(string) bool) func() error {
		return func() error {
			h := n.Health(ctx)
			if h.Status != status || !watcher(h.Checks["watcher"]) {
				return fmt.Errorf("health %+v", h)
			}
			return nil
		}
	}
	isOK := func(c string) bool { return c == "ok" }
	waitFor(t, 30*time.Second, "watcher ready", health("ok", isOK))
	away := filepath.Join(dir, "media-gone")
	if err := os.Rename(root, away); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "degraded while the root is away", health("degraded",
		func(c string) bool { return strings.Contains(c, "files root is missing") }))
	if err := os.Rename(away, root); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "ok once the root is back", health("ok", isOK))
}
