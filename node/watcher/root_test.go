package watcher_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/metanode/metanode/node/watcher"
)

// TestRootMovedAwayAndBack: the files root moved away is reported by
// Health (nothing deleted meanwhile), and once moved back the watcher
// watches it again: a file written afterwards is indexed (probe r_api3
// F5: it stayed deaf, and /health said ok).
func TestRootMovedAwayAndBack(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "media")
	writeFile(t, root, "a.bin", []byte("alpha"), at(1))
	writeFile(t, root, "sub/b.bin", []byte("bravo"), at(2))
	st := newMemStore()
	w := open(t, root, st)
	if err := w.Health(); err != nil {
		t.Fatalf("health at start: %v", err)
	}
	mark := st.mark()

	away := filepath.Join(dir, "media-gone")
	if err := os.Rename(root, away); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "health to report the missing root", func() bool { return errors.Is(w.Health(), watcher.ErrRootMissing) })
	if err := os.Rename(away, root); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "health ok again", func() bool { return w.Health() == nil })
	if ops := st.ops(mark); len(ops) != 0 {
		t.Errorf("updates while the root was away: %v", ops)
	}
	p := writeFile(t, root, "back.bin", []byte("back"), at(3))
	writeFile(t, root, "sub/c.bin", []byte("charlie"), at(4))
	waitFor(t, "the new files indexed", func() bool {
		_, ok1 := st.row(p)
		_, ok2 := st.row(filepath.Join(root, "sub/c.bin"))
		return ok1 && ok2
	})
	if d := diffStrings(st.paths(), []string{filepath.Join(root, "a.bin"), filepath.Join(root, "back.bin"),
		filepath.Join(root, "sub/b.bin"), filepath.Join(root, "sub/c.bin")}); d != "" {
		t.Errorf("rows:\n%s", d)
	}
}

// TestRootDeletedAndRecreated: a root deleted and made again (a new
// directory under the same path) is opened anew and scanned; live changes
// in it are seen.
func TestRootDeletedAndRecreated(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "media")
	writeFile(t, root, "a.bin", []byte("alpha"), at(1))
	st := newMemStore()
	w := open(t, root, st)

	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "health to report the missing root", func() bool { return errors.Is(w.Health(), watcher.ErrRootMissing) })
	p := writeFile(t, root, "new.bin", []byte("new"), at(2)) // makes the directory again
	waitFor(t, "the new root scanned", func() bool { _, ok := st.row(p); return ok && w.Health() == nil })
	q := writeFile(t, root, "live/later.bin", []byte("later"), at(3))
	waitFor(t, "a live change in the new root", func() bool { _, ok := st.row(q); return ok })
	if d := diffStrings(st.paths(), []string{filepath.Join(root, "live/later.bin"), p}); d != "" {
		t.Errorf("rows:\n%s", d)
	}
}

// TestRootRemadeWithinDebounce: rm -rf root && mkdir root (a library
// rebuilt in place) faster than one debounce: the path is there again at
// the flush, but it is another directory; the watcher must reopen and
// watch it, not keep the deleted one's handle (files put in the new root
// would wait for the periodic rescan, off here).
func TestRootRemadeWithinDebounce(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "media")
	writeFile(t, root, "a.bin", []byte("alpha"), at(1))
	st := newMemStore()
	open(t, root, st)
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	p := writeFile(t, root, "new.bin", []byte("new"), at(2))
	waitFor(t, "new.bin in the remade root", func() bool { _, ok := st.row(p); return ok })
	q := writeFile(t, root, "live/later.bin", []byte("later"), at(3))
	waitFor(t, "a live change in the remade root", func() bool { _, ok := st.row(q); return ok })
}
