package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRegister_NamesNothingOutsideTheRoot: plugin/ holds a symlink to a
// folder outside the files root. Registering any path through it, to a
// file there, to a missing one or through a file used as a folder, is
// refused the same way through the real server (400, the link named by
// its path under the root), and no answer names the outside folder or
// tells whether something exists there.
func TestRegister_NamesNothingOutsideTheRoot(t *testing.T) {
	ctx := context.Background()
	root, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "plugin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "plugin", "out")); err != nil {
		t.Skipf("no symlinks here: %v", err)
	}
	cfg := testConfig(t, dataDir(t, "home"))
	cfg.FilesRoot = root
	n := openNode(t, cfg)
	waitFor(t, 30*time.Second, "watcher ready", func() error {
		if h := n.Health(ctx); h.Checks["watcher"] != "ok" {
			return fmt.Errorf("health %+v", h)
		}
		return nil
	})
	for _, p := range []string{"plugin/out/secret.txt", "plugin/out/missing.txt", "plugin/out/secret.txt/x", "plugin/out/a/b/c"} {
		body, _ := json.Marshal(map[string]string{"path": p})
		resp, err := http.Post(n.APIURL()+"/api/files/register", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Error, Message string }
		_ = json.Unmarshal(b, &e)
		if resp.StatusCode != http.StatusBadRequest || e.Error != "schema_violation" || !strings.Contains(e.Message, "plugin/out is a symlink") {
			t.Errorf("register %s: %d %s, want 400 naming the link", p, resp.StatusCode, b)
		}
		if strings.Contains(string(b), outside) || strings.Contains(string(b), "secret.txt/") {
			t.Errorf("register %s: the answer names what is outside the root: %s", p, b)
		}
	}
}
