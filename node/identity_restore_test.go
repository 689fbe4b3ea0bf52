package node_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/metanode/metanode/node"
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
