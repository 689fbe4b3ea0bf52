package node_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/metanode/metanode/node"
)

// A second node on a running node's data directory stops at once; once the
// first closes, the directory is free again.
func TestNode_DataDirLock(t *testing.T) {
	dir := dataDir(t, "home")
	first := openNodeNoCleanup(t, testConfig(t, dir))
	second := node.New(testConfig(t, dir))
	if err := second.Open(context.Background()); !errors.Is(err, node.ErrDataDirInUse) {
		t.Fatalf("second node on one data directory: %v", err)
	}
	_ = second.Close()
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	openNode(t, testConfig(t, dir))
}

// A node whose truth database lives in another running node's directory
// (--truth-db) stops at once too: two nodes never write one truth.
func TestNode_TruthElsewhereLocked(t *testing.T) {
	dir := dataDir(t, "home")
	openNode(t, testConfig(t, dir))
	cfg := testConfig(t, dataDir(t, "other"))
	cfg.TruthPath = filepath.Join(dir, node.TruthFile)
	second := node.New(cfg)
	err := second.Open(context.Background())
	if !errors.Is(err, node.ErrDataDirInUse) {
		t.Fatalf("second node on the first's truth database: %v", err)
	}
	// The error names the directory locked, which is not this node's data
	// directory: the command tells the owner to change --truth-db.
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path != dir {
		t.Fatalf("second node on the first's truth database: %v, want a *fs.PathError for %s", err, dir)
	}
	_ = second.Close()
}

// A truth database in the data directory, named by another path to the
// same directory (absolute against relative, through a symlink), is under
// the data directory's lock: the node does not lock itself out (review 2.3:
// --data mn --truth-db $PWD/mn/truth.db failed as "another metanode").
func TestNode_TruthInDataDirOtherPath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	cfg := testConfig(t, "mn")
	cfg.TruthPath = filepath.Join(dir, "mn", node.TruthFile)
	n := openNodeNoCleanup(t, cfg)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "mn"), link); err != nil {
		t.Fatal(err)
	}
	cfg = testConfig(t, link)
	cfg.TruthPath = filepath.Join(dir, "mn", node.TruthFile)
	n = openNodeNoCleanup(t, cfg)
	// Still one lock: a second node on the real directory is refused.
	second := node.New(testConfig(t, filepath.Join(dir, "mn")))
	if err := second.Open(context.Background()); !errors.Is(err, node.ErrDataDirInUse) {
		t.Fatalf("second node on the directory behind the symlink: %v", err)
	}
	_ = second.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
}
