package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
)

// TestNode_ClearResyncsWatcher: POST /api/metadata/clear wipes local_file;
// the node has the watcher add the files still on disk again, so
// /api/files/tuples and GET /file/{cid} agree with the disk without a
// restart (probe r_api3 F3).
func TestNode_ClearResyncsWatcher(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	path := filepath.Join(root, "film.mkv")
	if err := os.WriteFile(path, []byte("not really a film"), 0o644); err != nil {
		t.Fatal(err)
	}
	cid, _, err := store.Midhash256File(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, dataDir(t, "home"))
	cfg.FilesRoot = root
	n := openNode(t, cfg)
	base := n.APIURL()
	get := func(p string) (int, []byte) {
		t.Helper()
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, b
	}
	served := func() error {
		if code, b := get("/file/" + cid); code != http.StatusOK {
			return fmt.Errorf("GET /file: %d %s", code, b)
		}
		code, b := get("/api/files/tuples")
		var tu struct{ Count int }
		if err := json.Unmarshal(b, &tu); err != nil || code != http.StatusOK || tu.Count != 1 {
			return fmt.Errorf("tuples: %d %s", code, b)
		}
		return nil
	}
	waitFor(t, 30*time.Second, "the file indexed", served)

	resp, err := http.Post(base+"/api/metadata/clear", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("clear: %d", resp.StatusCode)
	}
	waitFor(t, 30*time.Second, "the file indexed again after the clear", served)
	if _, err := n.Store().Resolve(ctx, cid); err != nil {
		t.Fatalf("cid after clear: %v", err)
	}
}
