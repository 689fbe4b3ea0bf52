package watcher_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/metanode/metanode/node/watcher"
	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// TestStore_NewDirectoryFileStillWritten: a file written into a directory
// created while the watcher runs (as cp -r does) is published once, whole,
// as in an existing directory. The flush that lists the new directory used
// to hash what it found at once, so consumers saw an add of the partial
// file (or of the empty file's cid) and then a change (probe r_api3 F4).
func TestStore_NewDirectoryFileStillWritten(t *testing.T) {
	s := storetest.Open(t, store.Config{})
	ev := follow(t, s)
	root := t.TempDir()
	// Long enough that a stalled writer (a loaded CI machine under -race)
	// does not look quiet: the test writes every few ms.
	const debounce = time.Second
	open(t, root, s, func(c *watcher.Config) { c.Debounce = debounce })

	dir := filepath.Join(root, "season")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "e1.mkv")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	// Keep writing, a piece every few ms, well past the directory's own
	// debounce; stop early if anything is published meanwhile (the bug).
	piece := make([]byte, 4096)
	deadline := time.Now().Add(3 * debounce)
	for i := 0; time.Now().Before(deadline) && ev.len() == 0; i++ {
		piece[0] = byte(i)
		if _, err := f.Write(piece); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	want := midhash(t, p)
	waitFor(t, "the whole file", func() bool {
		rows := rowsOf(t, s, root)
		return len(rows) == 1 && rows[0] == rowOf(t, root, "season/e1.mkv") &&
			ev.len() > 0 && ev.last()["midhash256"] == want
	})
	if d := diffStrings(ev.ops(0), []string{"add season/e1.mkv"}); d != "" {
		t.Fatalf("events:\n%s", d)
	}
	if m := ev.last(); m["midhash256"] != want || m["size"] != strconv.FormatInt(st.Size(), 10) {
		t.Errorf("add %v, want the whole file: size %d, midhash256 %s", m, st.Size(), want)
	}
}
