package watcher_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metanode/metanode/node/watcher"
	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// checkEmptyWaiting asserts what a watcher whose root is empty while files
// are indexed says: Health reports ErrRootEmpty (and ErrRootMissing) with
// the count and what to do, and Register answers "unavailable" for a file
// that is not there, not a missing file.
func checkEmptyWaiting(t *testing.T, w *watcher.Watcher, files int) {
	t.Helper()
	err := w.Health()
	if !errors.Is(err, watcher.ErrRootEmpty) || !errors.Is(err, watcher.ErrRootMissing) {
		t.Fatalf("health: %v, want ErrRootEmpty and ErrRootMissing", err)
	}
	for _, want := range []string{w.Root() + " is empty while " + strconv.Itoa(files) + " files are indexed", "nothing is deleted", "put any file in it"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("health %q does not say %q", err, want)
		}
	}
	_, _, err = w.Register(t.Context(), "a.bin")
	if !errors.Is(err, watcher.ErrRootEmpty) || !errors.Is(err, store.ErrUnavailable) || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("register: %v, want ErrRootEmpty and store.ErrUnavailable, not fs.ErrNotExist", err)
	}
}

// unmount stands for a share unmounted from the root: another directory,
// empty, at the root's path, and no event for the files it held. The
// share's directory is kept at the returned path, for mount.
func unmount(t *testing.T, root string) string {
	t.Helper()
	share := root + "-share"
	if err := os.Rename(root, share); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return share
}

// mount puts the share's directory back at the root's path, as a mount
// over the empty mount point does (another directory there).
func mount(t *testing.T, root, share string) {
	t.Helper()
	if err := os.Remove(root); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(share, root); err != nil {
		t.Fatal(err)
	}
}

// TestStore_EmptyRootAtStartKeepsRows: a start whose root is an empty
// directory while files are indexed (a mount point whose share is not
// mounted yet) deletes no row and sends no event: it waits as for a
// missing root. Once mounted, the unchanged files are neither hashed
// again nor sent as events.
func TestStore_EmptyRootAtStartKeepsRows(t *testing.T) {
	s := storetest.Open(t, store.Config{})
	root := filepath.Join(t.TempDir(), "media")
	want, ev := firstRun(t, s, root)

	share := unmount(t, root)
	w := start(t, root, s)
	waitFor(t, "health to report the empty root", func() bool { return errors.Is(w.Health(), watcher.ErrRootEmpty) })
	checkEmptyWaiting(t, w, 2)
	time.Sleep(300 * time.Millisecond) // a few polls of the empty root
	checkEmptyWaiting(t, w, 2)
	if isReady(w) {
		t.Error("ready while the root is empty")
	}
	if d := diffStrings(rowsOf(t, s, root), want); d != "" {
		t.Fatalf("rows while the root is empty:\n%s", d)
	}
	if st := w.Stats(); st.Scans != 0 || st.Applied != 0 {
		t.Errorf("stats %+v, want no scan, nothing applied", st)
	}

	mount(t, root, share)
	checkBackAndLive(t, w, s, root, ev, want, "the share was mounted")
}

// TestStore_RootEmptiedAtRuntime: the share unmounted while the node runs
// (the root's path names an empty directory, and no event came for its
// files) is noticed by the next scan, which deletes nothing. Putting one
// file in the empty root is how an owner says the library was emptied on
// purpose: the scan then adds it and deletes the other rows.
func TestStore_RootEmptiedAtRuntime(t *testing.T) {
	s := storetest.Open(t, store.Config{})
	root := filepath.Join(t.TempDir(), "media")
	writeFile(t, root, "a.bin", []byte("alpha"), at(1))
	writeFile(t, root, "sub/b.bin", []byte("bravo"), at(2))
	w := open(t, root, s, func(c *watcher.Config) { c.Rescan = 50 * time.Millisecond })
	want := rowsOf(t, s, root)
	ev := follow(t, s)
	waitFor(t, "the adds", func() bool { return ev.len() == 2 })

	unmount(t, root)
	waitFor(t, "health to report the empty root", func() bool { return errors.Is(w.Health(), watcher.ErrRootEmpty) })
	scans := w.Stats().Scans
	time.Sleep(300 * time.Millisecond) // several rescan periods and polls
	checkEmptyWaiting(t, w, 2)
	if d := diffStrings(rowsOf(t, s, root), want); d != "" {
		t.Fatalf("rows while the root is empty:\n%s", d)
	}
	if d := diffStrings(ev.ops(2), nil); d != "" {
		t.Errorf("events while the root is empty:\n%s", d)
	}
	if st := w.Stats(); st.Scans != scans {
		t.Errorf("scans ran on the empty root: %d, then %d", scans, st.Scans)
	}

	// The escape: one file in the empty root, and the library is what the
	// root holds.
	writeFile(t, root, "c.bin", []byte("charlie"), at(3))
	waitFor(t, "the other rows deleted", func() bool { return len(rowsOf(t, s, root)) == 1 })
	waitFor(t, "health ok", func() bool { return w.Health() == nil })
	if d := diffStrings(rowsOf(t, s, root), []string{rowOf(t, root, "c.bin")}); d != "" {
		t.Errorf("rows after the escape:\n%s", d)
	}
	waitFor(t, "the escape's events", func() bool { return ev.len() >= 5 })
	got := ev.ops(2)
	slices.Sort(got)
	if d := diffStrings(got, []string{"add c.bin", "delete a.bin", "delete sub/b.bin"}); d != "" {
		t.Errorf("events of the escape:\n%s", d)
	}
	if _, _, err := w.Register(t.Context(), "c.bin"); err != nil {
		t.Errorf("register after the escape: %v", err)
	}
}

// TestStore_LiveDeletesEmptyTheRoot: files deleted one by one while the
// node runs are ordinary deletes, even the last ones: their events delete
// the rows. The root left empty with no file indexed is an empty library,
// not an error.
func TestStore_LiveDeletesEmptyTheRoot(t *testing.T) {
	s := storetest.Open(t, store.Config{})
	root := filepath.Join(t.TempDir(), "media")
	a := writeFile(t, root, "a.bin", []byte("alpha"), at(1))
	b := writeFile(t, root, "sub/b.bin", []byte("bravo"), at(2))
	w := open(t, root, s, func(c *watcher.Config) { c.Rescan = 50 * time.Millisecond })
	ev := follow(t, s)
	waitFor(t, "the adds", func() bool { return ev.len() == 2 })

	for _, p := range []string{a, b, filepath.Dir(b)} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the rows deleted", func() bool { return len(rowsOf(t, s, root)) == 0 })
	scans := w.Stats().Scans
	waitFor(t, "two more rescans", func() bool { return w.Stats().Scans >= scans+2 })
	if err := w.Health(); err != nil {
		t.Errorf("health of an empty library: %v", err)
	}
	got := ev.ops(2)
	slices.Sort(got)
	if d := diffStrings(got, []string{"delete a.bin", "delete sub/b.bin"}); d != "" {
		t.Errorf("events:\n%s", d)
	}
}

// TestEmptyRootNoFiles: an empty root with no file indexed is an empty
// library: ready, healthy, a missing file is a missing file.
func TestEmptyRootNoFiles(t *testing.T) {
	root := t.TempDir()
	w := open(t, root, newMemStore())
	if err := w.Health(); err != nil {
		t.Errorf("health: %v", err)
	}
	if _, _, err := w.Register(t.Context(), "a.bin"); !errors.Is(err, fs.ErrNotExist) || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("register a missing file: %v, want fs.ErrNotExist", err)
	}
}
