package node_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/store"
)

// TestNode_NewKeyBesideTruthWarns: a truth database restored without its
// node key (operations.md backs up both) makes a new identity: the paired
// homes do not know it, so the node says so at WARN, naming node.key. A
// first start (no truth yet) makes its key quietly.
func TestNode_NewKeyBesideTruthWarns(t *testing.T) {
	dir := dataDir(t, "a")
	cfg, logs := capturing(t, testConfig(t, dir))
	a := openNodeNoCleanup(t, cfg)
	uid := a.UID()
	closeNode(t, a)
	if n := warns(logs, "new node key", uid); n != 0 {
		t.Fatalf("a first start warned %d times about its new key", n)
	}
	if err := os.Remove(filepath.Join(dir, node.KeyFile)); err != nil {
		t.Fatal(err)
	}
	a = openNodeNoCleanup(t, cfg)
	defer closeNode(t, a)
	if a.UID() == uid {
		t.Fatal("the same uid without its key")
	}
	if n := warns(logs, "made a new node key next to an existing truth database", a.UID()); n != 1 {
		t.Fatalf("%d WARN lines about a new key beside an existing truth, want 1", n)
	}
}

// TestLoadOrCreateIdentity_DamagedKey: a node.key left empty by an
// interrupted write, cut short or garbled is refused with what to do
// (restore it, or move it away for a new identity), and is never replaced
// by a new key on the node's own initiative.
func TestLoadOrCreateIdentity_DamagedKey(t *testing.T) {
	good, err := store.GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"empty":     "",
		"truncated": good.PrivateHex()[:31],
		"garbage":   "\x7fELF\x02\x01\x01 not a key",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), node.KeyFile)
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, err := node.LoadOrCreateIdentity(path)
			if !errors.Is(err, store.ErrBadKeyFile) {
				t.Fatalf("got %v, want store.ErrBadKeyFile", err)
			}
			for _, want := range []string{path, "an empty or damaged node.key", "restore it from your backup (docs/operations.md)", "move it away to make a new identity"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if got, _ := os.ReadFile(path); string(got) != content {
				t.Fatalf("the damaged key was changed to %q", got)
			}
			// Moved away, as the error says: a new identity.
			if err := os.Rename(path, path+".bad"); err != nil {
				t.Fatal(err)
			}
			s, created, err := node.LoadOrCreateIdentity(path)
			if err != nil || !created {
				t.Fatalf("after moving it away: created %v, %v", created, err)
			}
			again, created, err := node.LoadOrCreateIdentity(path)
			if err != nil || created || again.UID() != s.UID() {
				t.Fatalf("the new key does not read back: created %v, %v", created, err)
			}
		})
	}
}

// TestLoadOrCreateIdentity_RemovesStaleTemp: a key write that died after
// its link leaves a temporary copy of the key beside node.key; the next
// load (every start) removes it.
func TestLoadOrCreateIdentity_RemovesStaleTemp(t *testing.T) {
	path := filepath.Join(t.TempDir(), node.KeyFile)
	if _, _, err := node.LoadOrCreateIdentity(path); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(path), "."+node.KeyFile+".tmp-1")
	key, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.WriteFile(tmp, key, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, old, old); err != nil {
		t.Fatal(err)
	}
	if _, created, err := node.LoadOrCreateIdentity(path); err != nil || created {
		t.Fatalf("load: created %v, %v", created, err)
	}
	if _, err := os.Stat(tmp); err == nil {
		t.Fatal("the stale temporary copy of the key is still there after a load")
	}
}
