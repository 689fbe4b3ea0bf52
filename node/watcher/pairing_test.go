package watcher_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/metanode/metanode/node/watcher"
)

// Review 14 #5: a rename used to be paired by size and mtime alone, so a
// different file with the same size and mtime (cp -p, tar x, rsync -t and
// unzip all set mtimes) inherited a deleted file's cid, live and across a
// restart. On ext4 the new file often gets the deleted file's inode as
// well, so the inode alone does not tell either; these tests log when it
// happened.

// oldBytes and newBytes are two different files of one size; the tests
// give them one mtime, as such tools do.
var oldBytes, newBytes = []byte("AAAAAAAA"), []byte("BBBBBBBB")

// TestLive_DeleteAndAddSameSizeMtime: one file deleted and a different one
// of the same size and mtime added within the debounce (in a new directory,
// which the flush lists, and in a watched one) is a delete and an add, the
// new file with its own cid.
func TestLive_DeleteAndAddSameSizeMtime(t *testing.T) {
	for _, newRel := range []string{"b/new.srt", "a/new.srt"} {
		t.Run(filepath.Dir(newRel), func(t *testing.T) {
			root := t.TempDir()
			st := newMemStore()
			old := writeFile(t, root, "a/old.srt", oldBytes, at(1))
			open(t, root, st, renameDebounce)
			oldFi, err := os.Stat(old)
			if err != nil {
				t.Fatal(err)
			}
			mark := st.mark()
			if err := os.Remove(old); err != nil {
				t.Fatal(err)
			}
			p := writeFile(t, root, newRel, newBytes, at(1))
			waitFor(t, "the add and the delete", func() bool {
				_, added := st.row(p)
				_, kept := st.row(old)
				return added && !kept
			})
			logReuse(t, oldFi, p)
			got := st.ops(mark)
			slices.Sort(got)
			if d := diffStrings(got, []string{"add " + newRel, "delete a/old.srt"}); d != "" {
				t.Errorf("ops:\n%s", d)
			}
			if r, _ := st.row(p); r.CID != midhash(t, p) {
				t.Errorf("%s row cid %s, want its own midhash (it carries a/old.srt's)", newRel, r.CID)
			}
		})
	}
}

// TestOffline_DeleteAndAddSameSizeMtime: the same while the node was down:
// the restart's scan hashes the new file and finds another cid, so it is
// an add and the vanished row a delete.
func TestOffline_DeleteAndAddSameSizeMtime(t *testing.T) {
	root := t.TempDir()
	st := newMemStore()
	old := writeFile(t, root, "a/old.srt", oldBytes, at(1))
	w := open(t, root, st)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	mark := st.mark()
	if err := os.Remove(old); err != nil {
		t.Fatal(err)
	}
	p := writeFile(t, root, "b/new.srt", newBytes, at(1))
	open(t, root, st)
	got := st.ops(mark)
	slices.Sort(got)
	if d := diffStrings(got, []string{"add b/new.srt", "delete a/old.srt"}); d != "" {
		t.Errorf("ops:\n%s", d)
	}
	if r, _ := st.row(p); r.CID != midhash(t, p) {
		t.Errorf("b/new.srt row cid %s, want its own midhash", r.CID)
	}
}

// TestLive_ReplacedSamePathSizeMtime: a file deleted and a different one of
// the same size and mtime put at its path within the debounce is a change
// to the new file's cid, not the old row kept.
func TestLive_ReplacedSamePathSizeMtime(t *testing.T) {
	root := t.TempDir()
	st := newMemStore()
	p := writeFile(t, root, "x.srt", oldBytes, at(1))
	open(t, root, st, renameDebounce)
	oldFi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	oldCID := midhash(t, p)
	mark := st.mark()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "x.srt", newBytes, at(1))
	logReuse(t, oldFi, p)
	want := midhash(t, p)
	if want == oldCID {
		t.Fatal("test data: both files have one cid")
	}
	waitFor(t, "the new cid", func() bool { r, _ := st.row(p); return r.CID == want })
	if d := diffStrings(st.ops(mark), []string{"change x.srt"}); d != "" {
		t.Errorf("ops:\n%s", d)
	}
}

// TestLive_ReplacedByRenameSizeMtime: rsync -t (without --inplace) writes
// a temp file and renames it over the old one, keeping size and mtime: the
// name sees no delete, only the new inode tells. It is a change.
func TestLive_ReplacedByRenameSizeMtime(t *testing.T) {
	root := t.TempDir()
	st := newMemStore()
	p := writeFile(t, root, "x.srt", oldBytes, at(1))
	open(t, root, st)
	mark := st.mark()
	writeFile(t, root, "x.srt", newBytes, at(1)) // a temp file renamed over it
	want := midhash(t, p)
	waitFor(t, "the new cid", func() bool { r, _ := st.row(p); return r.CID == want })
	if d := diffStrings(st.ops(mark), []string{"change x.srt"}); d != "" {
		t.Errorf("ops:\n%s", d)
	}
}

// TestLive_MoveAfterRestart: rows loaded from the store learn their inode
// when the initial scan finds them unchanged, so a move made while the node
// runs is a rename without hashing, as before the restart.
func TestLive_MoveAfterRestart(t *testing.T) {
	root := t.TempDir()
	st := newMemStore()
	writeFile(t, root, "a/ep1.mkv", oldBytes, at(1))
	writeFile(t, root, "a/ep2.mkv", newBytes, at(1)) // same size and mtime
	w := open(t, root, st)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = open(t, root, st, renameDebounce)
	mark := st.mark()
	abs := func(rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }
	if err := os.Rename(abs("a/ep1.mkv"), abs("a/ep1 (copy).mkv")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the file's rename", func() bool { return len(st.ops(mark)) == 1 })
	if err := os.Rename(abs("a"), abs("show")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the directory's renames", func() bool { return len(st.ops(mark)) == 3 })
	got := st.ops(mark)
	slices.Sort(got[1:]) // one flush, in map order
	want := []string{"rename a/ep1.mkv>a/ep1 (copy).mkv",
		"rename a/ep1 (copy).mkv>show/ep1 (copy).mkv", "rename a/ep2.mkv>show/ep2.mkv"}
	if d := diffStrings(got, want); d != "" {
		t.Errorf("ops:\n%s", d)
	}
	if h := w.Stats().Hashed; h != 0 {
		t.Errorf("hashed %d files for two moves, want 0", h)
	}
	for _, rel := range []string{"show/ep1 (copy).mkv", "show/ep2.mkv"} {
		if r, _ := st.row(abs(rel)); r.CID != midhash(t, abs(rel)) {
			t.Errorf("%s: cid %s is not its midhash", rel, r.CID)
		}
	}
}

// TestRescan_DeleteAndAddSameSizeMtime: with the events lost (the loop
// never flushes here, as after a queue overflow), the rescan's sweep sees
// only that a known file is gone and a new one of its size and mtime is
// there, often on its inode: no event says whether it moved, so only its
// cid can pair it. A different file is an add; a moved one still a rename.
func TestRescan_DeleteAndAddSameSizeMtime(t *testing.T) {
	root := t.TempDir()
	st := newMemStore()
	old := writeFile(t, root, "a/old.srt", oldBytes, at(1))
	keep := writeFile(t, root, "a/keep.mkv", []byte("keep"), at(2))
	w := open(t, root, st, func(c *watcher.Config) {
		c.Debounce = 1 << 62
		c.Rescan = 20 * time.Millisecond
	})
	oldFi, err := os.Stat(old)
	if err != nil {
		t.Fatal(err)
	}
	mark, hashed := st.mark(), w.Stats().Hashed
	if err := os.Remove(old); err != nil {
		t.Fatal(err)
	}
	p := writeFile(t, root, "a/new.srt", newBytes, at(1))
	if err := os.Rename(keep, filepath.Join(root, "a/moved.mkv")); err != nil {
		t.Fatal(err)
	}
	logReuse(t, oldFi, p)
	scans := w.Stats().Scans
	waitFor(t, "a whole rescan after the changes", func() bool { return w.Stats().Scans >= scans+2 })
	got := st.ops(mark)
	slices.Sort(got)
	want := []string{"add a/new.srt", "delete a/old.srt", "rename a/keep.mkv>a/moved.mkv"}
	if d := diffStrings(got, want); d != "" {
		t.Errorf("ops:\n%s", d)
	}
	if r, _ := st.row(p); r.CID != midhash(t, p) {
		t.Errorf("a/new.srt row cid %s, want its own midhash", r.CID)
	}
	if h := w.Stats().Hashed - hashed; h != 2 {
		t.Errorf("hashed %d, want 2 (the new file and the moved one)", h)
	}
}

// logReuse says whether the new file at p got the deleted file's inode,
// the case the inode alone would have paired.
func logReuse(t *testing.T, old os.FileInfo, p string) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("new file on the deleted file's inode: %v", os.SameFile(old, fi))
}

// TestLive_MovedThenDeletedInodeReused: mv a b; rm b; then a different
// file of a's size and mtime (tar x) within the debounce. a's vanished row
// was "moved", but its inode was freed at b and ext4 gives it to the new
// file: a delete anywhere since (even of a name the watcher ignores) means
// the inode proves nothing, and the new file is hashed (review 16 #1).
func TestLive_MovedThenDeletedInodeReused(t *testing.T) {
	for _, via := range []string{"b.srt", ".a.srt.swp"} { // a watched name, an ignored one
		t.Run(via, func(t *testing.T) {
			root := t.TempDir()
			st := newMemStore()
			a := writeFile(t, root, "a.srt", oldBytes, at(1))
			open(t, root, st, renameDebounce)
			oldFi, err := os.Stat(a)
			if err != nil {
				t.Fatal(err)
			}
			mark := st.mark()
			mid := filepath.Join(root, via)
			if err := os.Rename(a, mid); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(mid); err != nil {
				t.Fatal(err)
			}
			c := writeFile(t, root, "c.srt", newBytes, at(1))
			logReuse(t, oldFi, c)
			want := midhash(t, c)
			waitFor(t, "c.srt's row", func() bool { _, ok := st.row(c); return ok })
			if r, _ := st.row(c); r.CID != want {
				t.Errorf("c.srt row cid %s, want its own %s; ops %q", r.CID, want, st.ops(mark))
			}
		})
	}
}

// TestLive_OverwrittenInPlaceSameSizeMtime: cp -p over an existing file of
// the same size rewrites it in place (same inode) and sets the source's
// mtime back: size, mtime and inode all match the row, but the watcher saw
// the Write events, so it hashes (review 16 #2). While the node is down
// this is not noticed (docs/watcher.md).
func TestLive_OverwrittenInPlaceSameSizeMtime(t *testing.T) {
	root := t.TempDir()
	st := newMemStore()
	p := writeFile(t, root, "x.srt", oldBytes, at(1))
	open(t, root, st)
	mark := st.mark()
	if err := os.WriteFile(p, newBytes, 0o644); err != nil { // truncates in place
		t.Fatal(err)
	}
	if err := os.Chtimes(p, at(1), at(1)); err != nil {
		t.Fatal(err)
	}
	want := midhash(t, p)
	waitFor(t, "x.srt's new cid", func() bool { r, _ := st.row(p); return r.CID == want })
	if ops := st.ops(mark); len(ops) != 1 {
		t.Errorf("ops %q, want one change", ops)
	}
}

// TestRescan_ReplacedByRenameSizeMtime: with the events lost (a queue
// overflow; the loop never flushes here), rsync -t (or cp -p through a
// temp name) replaces x.srt by a different file of the same size and
// mtime. The rescan compares the inode it knows on a file system that
// keeps inodes (fileid_linux.go) and hashes (review 17 R17-1: a scan that
// never compared inodes kept the old cid for good).
func TestRescan_ReplacedByRenameSizeMtime(t *testing.T) {
	root := t.TempDir()
	st := newMemStore()
	p := writeFile(t, root, "x.srt", oldBytes, at(1))
	w := open(t, root, st, func(c *watcher.Config) {
		c.Debounce = 1 << 62
		c.Rescan = 20 * time.Millisecond
	})
	tmp := filepath.Join(t.TempDir(), "x.srt") // outside the root: no event for the temp name
	if err := os.WriteFile(tmp, newBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, at(1), at(1)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Skipf("the temp dir is on another file system: %v", err)
	}
	want := midhash(t, p)
	scans := w.Stats().Scans
	waitFor(t, "two rescans", func() bool { return w.Stats().Scans >= scans+2 })
	if r, _ := st.row(p); r.CID != want {
		t.Errorf("x.srt row cid %s after the rescans, want its new %s", r.CID, want)
	}
}
