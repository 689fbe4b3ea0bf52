package watcher_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metanode/metanode/node/watcher"
	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// TestScan_DeepTreeCostsPerDirectory: a 300-level chain of folders with a
// file in each, indexed into a real store. The walk opens each folder once
// by name from its parent, so a rescan of the unchanged tree costs one
// open per folder, whatever the depth (resolving every path from the root
// cost the depth's square per folder, then its cube for the scan: 60 s at
// 300 levels, at every rescan). A file renamed at the bottom while the node
// was down is found as a rename.
func TestScan_DeepTreeCostsPerDirectory(t *testing.T) {
	const depth = 300
	root := t.TempDir()
	var rels []string
	dir := ""
	for i := range depth {
		dir += "d/"
		rel := fmt.Sprintf("%sf%03d.bin", dir, i)
		writeFile(t, root, rel, []byte(strings.Repeat("x", i+1)), at(i))
		rels = append(rels, rel)
	}
	tp := filepath.Join(t.TempDir(), "truth.db")
	s := storetest.Open(t, store.Config{TruthPath: tp, CachePath: tp + ".cache"})
	w := open(t, root, s)
	files, err := s.LocalFiles(t.Context())
	if err != nil || len(files) != depth {
		t.Fatalf("indexed %d files (%v), want %d", len(files), err, depth)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	w = open(t, root, s)
	if opens, h := watcher.DirOpens(w), w.Stats().Hashed; opens != depth || h != 0 {
		t.Fatalf("a restart's scan of %d unchanged folders opened %d and hashed %d, want one open per folder and none", depth, opens, h)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	last := rels[depth-1]
	moved := strings.TrimSuffix(last, ".bin") + "-moved.bin"
	if err := os.Rename(filepath.Join(root, last), filepath.Join(root, moved)); err != nil {
		t.Fatal(err)
	}
	w = open(t, root, s)
	if h := w.Stats().Hashed; h != 1 {
		t.Fatalf("the restart hashed %d files, want only the moved one", h)
	}
	files, err = s.LocalFiles(t.Context())
	if err != nil || len(files) != depth {
		t.Fatalf("after the restart %d files (%v), want %d", len(files), err, depth)
	}
	if !slicesContainsPath(files, filepath.Join(root, moved)) || slicesContainsPath(files, filepath.Join(root, last)) {
		t.Fatalf("the moved file at depth %d is not under its new name", depth)
	}
}

func slicesContainsPath(files []store.LocalFile, p string) bool {
	for _, f := range files {
		if f.Path == p {
			return true
		}
	}
	return false
}
