package watcher_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metanode/metanode/node/watcher"
	"github.com/metanode/metanode/store"
)

func TestOpen_Errors(t *testing.T) {
	t.Run("MissingRoot", func(t *testing.T) {
		// No error: waited for (TestRootMissingAtStart). Close while
		// waiting stops the polling scanner (goleak checks in TestMain).
		w := watcher.New(watcher.Config{Root: filepath.Join(t.TempDir(), "nope"), Store: newMemStore(), Logger: testLogger(t)})
		if err := w.Open(t.Context()); err != nil {
			t.Fatalf("open: %v", err)
		}
		if err := w.Health(); !errors.Is(err, watcher.ErrRootMissing) {
			t.Errorf("health: %v, want ErrRootMissing", err)
		}
		if err := w.Close(); err != nil {
			t.Errorf("close while the root is missing: %v", err)
		}
		if err := w.Close(); !errors.Is(err, watcher.ErrClosed) {
			t.Errorf("second close: got %v, want ErrClosed", err)
		}
	})
	t.Run("RootIsFile", func(t *testing.T) {
		p := writeFile(t, t.TempDir(), "f", []byte("x"), at(0))
		err := watcher.New(watcher.Config{Root: p, Store: newMemStore()}).Open(t.Context())
		if !errors.Is(err, store.ErrBadPath) {
			t.Fatalf("open: got %v, want store.ErrBadPath", err)
		}
		if !strings.Contains(err.Error(), "is not a directory: pass --files DIR (or FILES_PATH) naming a directory") {
			t.Errorf("open: %q does not say what to do", err)
		}
	})
	t.Run("RootNotPermitted", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root reads any directory")
		}
		parent := filepath.Join(t.TempDir(), "locked")
		if err := os.MkdirAll(filepath.Join(parent, "media"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(parent, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(parent, 0o755) })
		err := watcher.New(watcher.Config{Root: filepath.Join(parent, "media"), Store: newMemStore()}).Open(t.Context())
		if !errors.Is(err, fs.ErrPermission) {
			t.Fatalf("open: got %v, want fs.ErrPermission", err)
		}
	})
	t.Run("NotOpened", func(t *testing.T) {
		w := watcher.New(watcher.Config{Root: t.TempDir(), Store: newMemStore()})
		if _, _, err := w.Register(t.Context(), "plugin/x"); !errors.Is(err, watcher.ErrClosed) {
			t.Errorf("register before open: got %v, want ErrClosed", err)
		}
		if err := w.Close(); err != nil {
			t.Errorf("first close: %v", err)
		}
		if err := w.Close(); !errors.Is(err, watcher.ErrClosed) {
			t.Errorf("second close: got %v, want ErrClosed", err)
		}
		if err := w.Open(t.Context()); err == nil {
			t.Error("open after close succeeded")
		}
	})
	t.Run("CloseTwice", func(t *testing.T) {
		w := watcher.New(watcher.Config{Root: t.TempDir(), Store: newMemStore(), Logger: testLogger(t)})
		if err := w.Open(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-w.Ready()
		if err := w.Close(); err != nil {
			t.Errorf("first close: %v", err)
		}
		if err := w.Close(); !errors.Is(err, watcher.ErrClosed) {
			t.Errorf("second close: got %v, want ErrClosed", err)
		}
	})
}

// TestInitialScan indexes a tree with the spec's vectors, nested
// directories, ignored names and symlinks in and out of the root.
func TestInitialScan(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	writeFile(t, root, "hello.txt", []byte("hello"), at(1))
	writeFile(t, root, "empty", nil, at(2))
	writeFile(t, root, "sub/b.bin", make([]byte, 1000), at(3))
	writeFile(t, root, "sub/deep/c.bin", []byte("c"), at(4))
	writeFile(t, root, ".hidden", []byte("h"), at(5))
	writeFile(t, root, "sub/.sync/x", []byte("x"), at(6))
	writeFile(t, root, "movie.mkv.part", []byte("partial"), at(7))
	secret := writeFile(t, outside, "secret.txt", []byte("secret"), at(8))
	writeFile(t, outside, "dir/inner.txt", []byte("inner"), at(9))
	for link, target := range map[string]string{
		"link-out":    secret,
		"linkdir-out": filepath.Join(outside, "dir"),
		"link-in":     filepath.Join(root, "hello.txt"),
		"linkdir-in":  filepath.Join(root, "sub"),
		"link-rel":    "../" + filepath.Base(outside) + "/secret.txt",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}

	st := newMemStore()
	w := open(t, root, st)

	want := []string{
		filepath.Join(root, "empty"),
		filepath.Join(root, "hello.txt"),
		filepath.Join(root, "sub/b.bin"),
		filepath.Join(root, "sub/deep/c.bin"),
	}
	if d := diffStrings(st.paths(), want); d != "" {
		t.Fatalf("rows:\n%s", d)
	}
	vectors := map[string]string{
		"hello.txt": "bagacbabaeddealivdfucjicjvwd4g4nfar5gonjvykwimb7cx6sih52zdtbhu",
		"empty":     "bagacbabaecxvk4hvugaqw6xxrsxuxrykmyhq35i6ik5pshkn4wzdfdpa5a67y",
	}
	for rel, cid := range vectors {
		r, _ := st.row(filepath.Join(root, rel))
		if r.CID != cid {
			t.Errorf("%s: cid %s, want %s", rel, r.CID, cid)
		}
	}
	r, _ := st.row(filepath.Join(root, "sub/b.bin"))
	if r.Size != 1000 || r.MtimeNano != at(3).UnixNano() {
		t.Errorf("b.bin row %+v: want size 1000, mtime %d", r, at(3).UnixNano())
	}
	if got := st.ops(0); len(got) != 4 || slices.ContainsFunc(got, func(op string) bool { return op[:4] != "add " }) {
		t.Errorf("ops %q: want 4 adds", got)
	}
	if s := w.Stats(); s.Hashed != 4 || s.Files != 4 || s.Scans != 1 {
		t.Errorf("stats %+v: want 4 hashed, 4 files, 1 scan", s)
	}
}

// TestRescan_NoRehash: a restart and periodic rescans hash nothing when
// nothing changed (size and mtime match the rows).
func TestRescan_NoRehash(t *testing.T) {
	root := t.TempDir()
	for i := range 20 {
		writeFile(t, root, filepath.Join("d", string(rune('a'+i))), []byte{byte(i)}, at(i))
	}
	st := newMemStore()
	w := open(t, root, st)
	if h := w.Stats().Hashed; h != 20 {
		t.Fatalf("first scan hashed %d, want 20", h)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	mark := st.mark()

	w2 := open(t, root, st, func(c *watcher.Config) { c.Rescan = 10 * time.Millisecond })
	waitFor(t, "three scans", func() bool { return w2.Stats().Scans >= 3 })
	if s := w2.Stats(); s.Hashed != 0 || s.Files != 20 {
		t.Errorf("after restart and rescans: %+v, want nothing hashed and 20 files", s)
	}
	if ops := st.ops(mark); len(ops) != 0 {
		t.Errorf("updates after restart: %q", ops)
	}
}

// TestOfflineChanges: changes made while the watcher was stopped are found
// by the next initial scan, with a move recorded as a rename (the moved
// file hashed once: only its cid can pair it after a restart).
func TestOfflineChanges(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, "a.bin", []byte("aaaa"), at(1))
	writeFile(t, root, "b.bin", []byte("bbbb"), at(2))
	writeFile(t, root, "c.bin", []byte("cccc"), at(3))
	writeFile(t, root, "keep.bin", []byte("keep"), at(4))
	st := newMemStore()
	w := open(t, root, st)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	mark := st.mark()

	if err := os.MkdirAll(filepath.Join(root, "moved"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root, "a.bin"), filepath.Join(root, "moved/a2.bin")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, "b.bin")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "c.bin", []byte("CCCC"), at(30))
	writeFile(t, root, "e.bin", []byte("eeee"), at(31))

	w2 := open(t, root, st)
	got := st.ops(mark)
	slices.Sort(got)
	want := []string{"add e.bin", "change c.bin", "delete b.bin", "rename a.bin>moved/a2.bin"}
	if d := diffStrings(got, want); d != "" {
		t.Errorf("ops:\n%s", d)
	}
	if h := w2.Stats().Hashed; h != 3 {
		t.Errorf("hashed %d on restart, want 3 (c, e and the moved a)", h)
	}
	r, _ := st.row(filepath.Join(root, "moved/a2.bin"))
	if want := midhash(t, filepath.Join(root, "moved/a2.bin")); r.CID != want {
		t.Errorf("renamed row cid %s, want %s", r.CID, want)
	}
}

// TestLive follows create, modify, rename, delete, new nested directories
// and a directory move through fsnotify.
func TestLive(t *testing.T) {
	root := t.TempDir()
	st := newMemStore()
	// A vanished path waits a debounce for its rename partner: 20 ms is
	// one stall of a loaded machine between the two inotify events.
	w := open(t, root, st, renameDebounce)
	abs := func(rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }
	has := func(rel string) func() bool {
		return func() bool { _, ok := st.row(abs(rel)); return ok }
	}
	step := func(name string, want []string, do func(), until func() bool) {
		t.Helper()
		mark := st.mark()
		do()
		waitFor(t, name, until)
		got := st.ops(mark)
		slices.Sort(got) // files of one directory may land in one flush or several
		if d := diffStrings(got, want); d != "" {
			t.Errorf("%s:\n%s", name, d)
		}
	}

	step("create", []string{"add x/new.bin"}, func() {
		writeFile(t, root, "x/new.bin", []byte("first"), at(1))
	}, has("x/new.bin"))
	if r, _ := st.row(abs("x/new.bin")); r.CID != midhash(t, abs("x/new.bin")) {
		t.Errorf("created row cid %s is not the file's midhash", r.CID)
	}

	old, _ := st.row(abs("x/new.bin"))
	step("modify", []string{"change x/new.bin"}, func() {
		writeFile(t, root, "x/new.bin", []byte("other"), at(2))
	}, func() bool { r, _ := st.row(abs("x/new.bin")); return r.CID != old.CID })

	hashed := w.Stats().Hashed
	step("rename", []string{"rename x/new.bin>y.bin"}, func() {
		if err := os.Rename(abs("x/new.bin"), abs("y.bin")); err != nil {
			t.Fatal(err)
		}
	}, has("y.bin"))
	if h := w.Stats().Hashed; h != hashed {
		t.Errorf("rename hashed %d files, want none", h-hashed)
	}

	step("delete", []string{"delete y.bin"}, func() {
		if err := os.Remove(abs("y.bin")); err != nil {
			t.Fatal(err)
		}
	}, func() bool { return len(st.paths()) == 0 })

	step("nested directories", []string{"add d1/d2/d3/f.bin"}, func() {
		writeFile(t, root, "d1/d2/d3/f.bin", []byte("deep"), at(3))
	}, has("d1/d2/d3/f.bin"))

	step("directory move", []string{"rename d1/d2/d3/f.bin>e1/d2/d3/f.bin"}, func() {
		if err := os.Rename(abs("d1"), abs("e1")); err != nil {
			t.Fatal(err)
		}
	}, has("e1/d2/d3/f.bin"))

	// The moved directories are still watched, under their new names.
	step("create in moved directory", []string{"add e1/d2/d3/g.bin"}, func() {
		writeFile(t, root, "e1/d2/d3/g.bin", []byte("gee"), at(4))
	}, has("e1/d2/d3/g.bin"))

	step("directory delete", []string{"delete e1/d2/d3/f.bin", "delete e1/d2/d3/g.bin"}, func() {
		if err := os.RemoveAll(abs("e1")); err != nil {
			t.Fatal(err)
		}
	}, func() bool { return len(st.paths()) == 0 })

	// Removed and made again at once: the new directory is watched.
	step("directory made", []string{"add r/1"}, func() {
		writeFile(t, root, "r/1", []byte("one"), at(10))
	}, has("r/1"))
	step("directory remade", []string{"add r/2", "delete r/1"}, func() {
		if err := os.RemoveAll(abs("r")); err != nil {
			t.Fatal(err)
		}
		writeFile(t, root, "r/2", []byte("two"), at(11))
	}, func() bool { _, one := st.row(abs("r/1")); return !one && has("r/2")() })
	step("create in remade directory", []string{"add r/3"}, func() {
		writeFile(t, root, "r/3", []byte("three"), at(12))
	}, has("r/3"))
	step("clean up", []string{"delete r/2", "delete r/3"}, func() {
		if err := os.RemoveAll(abs("r")); err != nil {
			t.Fatal(err)
		}
	}, func() bool { return len(st.paths()) == 0 })

	// A directory moved in from outside the root arrives whole.
	outside := t.TempDir()
	writeFile(t, outside, "album/1.flac", []byte("one"), at(5))
	writeFile(t, outside, "album/cd2/2.flac", []byte("two"), at(6))
	step("directory moved in", []string{"add album/1.flac", "add album/cd2/2.flac"}, func() {
		if err := os.Rename(filepath.Join(outside, "album"), abs("album")); err != nil {
			t.Fatal(err)
		}
	}, func() bool { return len(st.paths()) == 2 })
}

// TestLive_Skipped: symlinks (escaping or not), hidden files and partial
// downloads never become rows; a finished download renamed into place does.
// Each check waits for a later sentinel file, so absence is not a guess.
func TestLive_Skipped(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	secret := writeFile(t, outside, "secret.txt", []byte("secret"), at(1))
	st := newMemStore()
	open(t, root, st)
	abs := func(rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }

	writeFile(t, root, "in.txt", []byte("in"), at(2))
	for link, target := range map[string]string{
		"esc.txt": secret, "escdir": outside, "inlink.txt": abs("in.txt"),
	} {
		if err := os.Symlink(target, abs(link)); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, root, ".hidden.txt", []byte("h"), at(3))
	writeFile(t, root, "film.mkv.part", []byte("partial"), at(4))
	writeFile(t, root, "sentinel1", []byte("s1"), at(5))
	waitFor(t, "sentinel1", func() bool { _, ok := st.row(abs("sentinel1")); return ok })
	want := []string{abs("in.txt"), abs("sentinel1")}
	if d := diffStrings(st.paths(), want); d != "" {
		t.Errorf("rows:\n%s", d)
	}

	// A file replaced by a symlink loses its row.
	if err := os.Remove(abs("in.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, abs("in.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(abs("film.mkv.part"), abs("film.mkv")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "sentinel2", []byte("s2"), at(6))
	want = []string{abs("film.mkv"), abs("sentinel1"), abs("sentinel2")}
	waitFor(t, "in.txt deleted, sentinel2 added", func() bool {
		_, in := st.row(abs("in.txt"))
		_, s2 := st.row(abs("sentinel2"))
		return !in && s2
	})
	if d := diffStrings(st.paths(), want); d != "" {
		t.Errorf("rows:\n%s", d)
	}
}

// TestMiddleMiB checks the midhash256 sampling rule on a 5 MB file: bytes
// outside the middle MiB do not change the id, bytes inside do, and a hash
// reads one MiB, not the file.
func TestMiddleMiB(t *testing.T) {
	const size = 5_000_000
	data := make([]byte, size)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	expect := func(data []byte) string {
		off := (len(data) - 1<<20) / 2
		h := sha256.New()
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(data))))
		h.Write(data[off : off+1<<20])
		return store.MidhashCID(h.Sum(nil))
	}
	root := t.TempDir()
	st := newMemStore()
	w := open(t, root, st)
	p := filepath.Join(root, "big.bin")
	cidIs := func(want string) func() bool {
		return func() bool { r, _ := st.row(p); return r.CID == want }
	}

	writeFile(t, root, "big.bin", data, at(1))
	want := expect(data)
	waitFor(t, "big.bin added with the middle-MiB midhash", cidIs(want))

	data[0] ^= 0xff // outside the sample
	writeFile(t, root, "big.bin", data, at(2))
	waitFor(t, "mtime change applied", func() bool { r, _ := st.row(p); return r.MtimeNano == at(2).UnixNano() })
	if r, _ := st.row(p); r.CID != want {
		t.Errorf("a byte outside the middle MiB changed the cid")
	}

	data[size/2] ^= 0xff // inside the sample
	writeFile(t, root, "big.bin", data, at(3))
	waitFor(t, "middle change applied", cidIs(expect(data)))
	if expect(data) == want {
		t.Fatal("test data: middle change did not change the expected cid")
	}
	if s := w.Stats(); s.Hashed != 3 || s.HashedBytes != 3<<20 {
		t.Errorf("stats %+v: want 3 hashes of exactly 1 MiB each", s)
	}
}

func TestStrayRows(t *testing.T) {
	t.Run("SomeOutside", func(t *testing.T) {
		root := t.TempDir()
		p := writeFile(t, root, "f", []byte("f"), at(1))
		st := newMemStore()
		st.rows[p] = store.LocalFile{Path: p, CID: midhash(t, p), Size: 1, MtimeNano: at(1).UnixNano()}
		st.rows["/elsewhere/x"] = store.LocalFile{Path: "/elsewhere/x", CID: "bx", Size: 1}
		w := open(t, root, st)
		if d := diffStrings(st.ops(0), []string{"delete /elsewhere/x"}); d != "" {
			t.Errorf("ops:\n%s", d)
		}
		if h := w.Stats().Hashed; h != 0 {
			t.Errorf("hashed %d, want 0", h)
		}
	})
	t.Run("AllOutside", func(t *testing.T) {
		root := t.TempDir()
		writeFile(t, root, "f", []byte("f"), at(1))
		st := newMemStore()
		st.rows["/old/root/x"] = store.LocalFile{Path: "/old/root/x", CID: "bx", Size: 1}
		open(t, root, st)
		if d := diffStrings(st.ops(0), []string{"reset ", "add f"}); d != "" {
			t.Errorf("ops:\n%s", d)
		}
	})
}

// TestStoreFailure: a failed ApplyFiles loses nothing: the initial scan
// retries, and a failed live change is repaired by the rescan it triggers.
func TestStoreFailure(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, "a", []byte("a"), at(1))
	st := newMemStore()
	st.failNext(1)
	open(t, root, st) // the first attempt fails, the retry works
	if d := diffStrings(st.paths(), []string{filepath.Join(root, "a")}); d != "" {
		t.Fatalf("rows after retried initial scan:\n%s", d)
	}

	st.failNext(1)
	writeFile(t, root, "b", []byte("b"), at(2))
	waitFor(t, "b added by the rescan", func() bool { _, ok := st.row(filepath.Join(root, "b")); return ok })
}

// recorder keeps log records' messages and attributes.
type recorder struct {
	mu   *sync.Mutex
	recs *[]map[string]string
}

func (r recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r recorder) WithGroup(string) slog.Handler            { return r }
func (r recorder) Handle(_ context.Context, rec slog.Record) error {
	m := map[string]string{"msg": rec.Message}
	rec.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	r.mu.Lock()
	*r.recs = append(*r.recs, m)
	r.mu.Unlock()
	return nil
}

// TestProgressLog: a long initial scan reports files seen, hashed and bytes
// while it runs, and a summary when done.
func TestProgressLog(t *testing.T) {
	root := t.TempDir()
	for i := range 50 {
		writeFile(t, root, fmt.Sprintf("f%02d", i), make([]byte, 100), at(i))
	}
	var recs []map[string]string
	mu := &sync.Mutex{}
	open(t, root, newMemStore(), func(c *watcher.Config) {
		c.Logger = slog.New(recorder{mu, &recs})
		c.Progress = time.Nanosecond // every file, for the test
	})
	mu.Lock()
	defer mu.Unlock()
	var progress, done []map[string]string
	for _, m := range recs {
		switch m["msg"] {
		case "initial scan in progress":
			progress = append(progress, m)
		case "initial scan done":
			done = append(done, m)
		}
	}
	if len(progress) == 0 || progress[0]["seen"] == "" || progress[0]["hashed"] == "" || progress[0]["bytes"] == "" {
		t.Errorf("progress records %v", progress)
	}
	if len(done) != 1 || done[0]["files"] != "50" || done[0]["hashed"] != "50" || done[0]["bytes"] != "5000" {
		t.Errorf("summary records %v", done)
	}
}

// TestLive_Debounce: a file written in many pieces (a copy or a download in
// progress) is looked at once it has been quiet for the debounce time, not
// at every write: one add, one hash. (A machine stalled for longer than the
// debounce in the middle of the burst may see it twice; never more.)
func TestLive_Debounce(t *testing.T) {
	root := t.TempDir()
	st := newMemStore()
	w := open(t, root, st, func(c *watcher.Config) { c.Debounce = time.Second })
	p := filepath.Join(root, "slow.bin")
	mark, hashed := st.mark(), w.Stats().Hashed
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	const pieces = 40
	piece := make([]byte, 4096)
	for i := range pieces {
		piece[0] = byte(i)
		if _, err := f.Write(piece); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil { // each piece reaches the file on its own
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want := midhash(t, p)
	waitFor(t, "the whole file", func() bool { r, ok := st.row(p); return ok && r.CID == want })
	ops := st.ops(mark)
	if len(ops) == 0 || ops[0] != "add slow.bin" || len(ops) > 2 {
		t.Errorf("ops=%v, want one add (at most one later change)", ops)
	}
	if h := w.Stats().Hashed - hashed; h > 2 {
		t.Errorf("hashed %d times for %d writes, want once", h, pieces)
	}
}

// TestCloseDuringOpen: a Close racing Open either stops what Open started
// or makes Open return ErrClosed; never both nil with the loops running
// (review s12 H M1: a race on the loops' context, loops that outlived
// Close). goleak in TestMain catches a loop left running.
func TestCloseDuringOpen(t *testing.T) {
	for i := range 50 {
		w := watcher.New(watcher.Config{Root: t.TempDir(), Store: newMemStore(), Logger: testLogger(t)})
		var wg sync.WaitGroup
		var openErr, closeErr error
		wg.Add(2)
		go func() { defer wg.Done(); openErr = w.Open(t.Context()) }()
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i%5) * 10 * time.Microsecond)
			closeErr = w.Close()
		}()
		wg.Wait()
		if closeErr != nil {
			t.Fatalf("iteration %d: Close: %v", i, closeErr)
		}
		if openErr != nil && !errors.Is(openErr, watcher.ErrClosed) {
			t.Fatalf("iteration %d: Open: %v, want nil or ErrClosed", i, openErr)
		}
		if err := w.Close(); !errors.Is(err, watcher.ErrClosed) {
			t.Fatalf("iteration %d: a second Close: %v", i, err)
		}
	}
}
