package watcher_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/metanode/metanode/node/watcher"
	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
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
	// The open handle still reads the moved directory: Register must not
	// record a file through it.
	if _, _, err := w.Register(t.Context(), "a.bin"); !errors.Is(err, watcher.ErrRootMissing) || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("register while the root is away: %v, want ErrRootMissing and store.ErrUnavailable", err)
	}
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

// start opens a watcher on root with short timings; unlike open it does
// not wait for Ready.
func start(t *testing.T, root string, st watcher.Store) *watcher.Watcher {
	t.Helper()
	w := watcher.New(watcher.Config{Root: root, Store: st, Logger: testLogger(t), Debounce: 20 * time.Millisecond, Rescan: -1})
	if err := w.Open(t.Context()); err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil && !errors.Is(err, watcher.ErrClosed) {
			t.Errorf("close: %v", err)
		}
	})
	return w
}

func isReady(w *watcher.Watcher) bool {
	select {
	case <-w.Ready():
		return true
	default:
		return false
	}
}

// checkWaiting asserts what a watcher whose root is missing says: Health
// reports it, Ready is open, Register answers "unavailable" (not a missing
// file), and nothing was scanned.
func checkWaiting(t *testing.T, w *watcher.Watcher) {
	t.Helper()
	if err := w.Health(); !errors.Is(err, watcher.ErrRootMissing) {
		t.Errorf("health: %v, want ErrRootMissing", err)
	}
	if isReady(w) {
		t.Error("ready while the root is missing")
	}
	_, _, err := w.Register(t.Context(), "a.bin")
	if !errors.Is(err, watcher.ErrRootMissing) || !errors.Is(err, store.ErrUnavailable) || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("register: %v, want ErrRootMissing and store.ErrUnavailable, not fs.ErrNotExist", err)
	}
	if s := w.Stats(); s.Scans != 0 || s.Applied != 0 {
		t.Errorf("stats %+v, want no scan, nothing applied", s)
	}
}

// TestRootMissingAtStart: a files root that does not exist at Open (a share
// mounted after the node started) is waited for as one lost while running,
// not an error that stops the node; once it appears it is opened, watched
// and scanned, and Ready closes.
func TestRootMissingAtStart(t *testing.T) {
	root := filepath.Join(t.TempDir(), "media")
	st := newMemStore()
	w := start(t, root, st)
	checkWaiting(t, w)
	time.Sleep(300 * time.Millisecond) // a few polls of the missing root
	checkWaiting(t, w)

	a := writeFile(t, root, "a.bin", []byte("alpha"), at(1)) // makes the root
	b := writeFile(t, root, "sub/b.bin", []byte("bravo"), at(2))
	select {
	case <-w.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("not ready 20s after the root appeared")
	}
	if err := w.Health(); err != nil {
		t.Errorf("health once the root is there: %v", err)
	}
	waitFor(t, "both files indexed", func() bool {
		_, ok1 := st.row(a)
		_, ok2 := st.row(b)
		return ok1 && ok2
	})
	c := writeFile(t, root, "sub/live.bin", []byte("live"), at(3))
	waitFor(t, "a live change in the root", func() bool { _, ok := st.row(c); return ok })
	if _, _, err := w.Register(t.Context(), "a.bin"); err != nil {
		t.Errorf("register once the root is there: %v", err)
	}
}

// TestStore_RootMissingAtStartKeepsRows: rows from a previous run survive a
// start whose root is missing (a missing root is no empty root, whose scan
// would delete every row), and when it comes back the unchanged files are
// neither hashed again nor sent as events.
func TestStore_RootMissingAtStartKeepsRows(t *testing.T) {
	s := storetest.Open(t, store.Config{})
	dir := t.TempDir()
	root := filepath.Join(dir, "media")
	want, ev := firstRun(t, s, root)

	away := filepath.Join(dir, "unmounted")
	if err := os.Rename(root, away); err != nil {
		t.Fatal(err)
	}
	w := start(t, root, s)
	checkWaiting(t, w)
	time.Sleep(300 * time.Millisecond) // a few polls of the missing root
	checkWaiting(t, w)
	if d := diffStrings(rowsOf(t, s, root), want); d != "" {
		t.Fatalf("rows while the root is missing:\n%s", d)
	}

	if err := os.Rename(away, root); err != nil { // mounted
		t.Fatal(err)
	}
	checkBackAndLive(t, w, s, root, ev, want, "the root came back")
	want = append(want, rowOf(t, root, "c.bin"))
	slices.Sort(want)
	if d := diffStrings(rowsOf(t, s, root), want); d != "" {
		t.Errorf("rows with the new file:\n%s", d)
	}
}

// checkBackAndLive: once the root is back (moved back, or mounted), the
// watcher is ready within a bounded wait and healthy, holds the rows want
// of two files after one scan that hashed and applied nothing, and sees a
// new file live.
func checkBackAndLive(t *testing.T, w *watcher.Watcher, s *store.Store, root string, ev *feed, want []string, what string) {
	t.Helper()
	select {
	case <-w.Ready():
	case <-time.After(20 * time.Second):
		t.Fatalf("not ready 20s after %s", what)
	}
	if err := w.Health(); err != nil {
		t.Errorf("health once %s: %v", what, err)
	}
	if d := diffStrings(rowsOf(t, s, root), want); d != "" {
		t.Errorf("rows once %s:\n%s", what, d)
	}
	if st := w.Stats(); st.Hashed != 0 || st.Applied != 0 || st.Files != 2 || st.Scans != 1 {
		t.Errorf("stats %+v, want one scan, nothing hashed or applied, 2 files", st)
	}
	writeFile(t, root, "c.bin", []byte("charlie"), at(3))
	waitFor(t, "the new file's add", func() bool { return ev.len() >= 3 })
	if d := diffStrings(ev.ops(2), []string{"add c.bin"}); d != "" {
		t.Errorf("events after the start:\n%s", d)
	}
}

// firstRun indexes two files under root with a watcher run that ends, and
// returns their rows and a feed of the store's file events (holding that
// run's two adds).
func firstRun(t *testing.T, s *store.Store, root string) ([]string, *feed) {
	t.Helper()
	writeFile(t, root, "a.bin", []byte("alpha"), at(1))
	writeFile(t, root, "sub/b.bin", []byte("bravo"), at(2))
	w1 := open(t, root, s)
	if err := w1.Close(); err != nil {
		t.Fatal(err)
	}
	want := rowsOf(t, s, root)
	if len(want) != 2 {
		t.Fatalf("rows of the first run: %v", want)
	}
	ev := follow(t, s)
	waitFor(t, "the first run's adds", func() bool { return ev.len() == 2 })
	return want, ev
}
