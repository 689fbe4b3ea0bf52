package watcher

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
)

// Settles hash outside the lock. These tests run a scan's settle in its
// two halves by hand, with the event loop's work in between, as it happens
// when a file changes or vanishes while a scan hashes it.

// raceWatcher is a watcher over root with its view loaded, not opened.
func raceWatcher(t *testing.T, root string) (*Watcher, *rowStore) {
	t.Helper()
	st := &rowStore{rows: map[string]store.LocalFile{}}
	w := New(Config{Root: root, Store: st, Logger: slog.New(slog.DiscardHandler)})
	w.rootAbs = root
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	w.root.Store(r)
	return w, st
}

// writeAt writes data at rel with the mtime base+i seconds and returns
// what a listing says about it.
func writeAt(t *testing.T, root, rel, data string, i int) fileStat {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	mt := time.Unix(1_700_000_000+int64(i), 0)
	if err := os.Chtimes(p, mt, mt); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fileStat{rel: rel, size: int64(len(data)), mtime: mt.UnixNano(), id: idOf(fi)}
}

// scanFirstHalf lists and hashes files as a scan's settle does before it
// takes the lock again.
func scanFirstHalf(t *testing.T, w *Watcher, files []fileStat) ([]hashedFile, uint64) {
	t.Helper()
	w.mu.Lock()
	tk := w.view.ticket()
	_, need := w.classifyLocked(files, tk)
	w.mu.Unlock()
	return w.hashAll(context.Background(), need, nil), tk
}

func scanSecondHalf(t *testing.T, w *Watcher, hashed []hashedFile, tk uint64) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.commitLocked(context.Background(), w.decideLocked(hashed, tk)); err != nil {
		t.Fatal(err)
	}
	w.view.done(tk)
}

// TestSettle_StaleScanResultDropped: a scan hashes version 1 of a file;
// meanwhile the file becomes version 2 and the event loop stores that.
// The scan's late result must not put version 1 back.
func TestSettle_StaleScanResultDropped(t *testing.T) {
	root := t.TempDir()
	w, st := raceWatcher(t, root)
	ctx := context.Background()
	if err := w.settle(ctx, []fileStat{writeAt(t, root, "a.mkv", "version zero", 0)}, nil); err != nil {
		t.Fatal(err)
	}
	hashed, tk := scanFirstHalf(t, w, []fileStat{writeAt(t, root, "a.mkv", "version one!", 1)})
	if len(hashed) != 1 {
		t.Fatalf("scan hashed %d files", len(hashed))
	}
	if err := w.settle(ctx, []fileStat{writeAt(t, root, "a.mkv", "version two!", 2)}, nil); err != nil {
		t.Fatal(err)
	}
	scanSecondHalf(t, w, hashed, tk)

	f, err := os.Open(filepath.Join(root, "a.mkv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	want, err := store.Midhash256(f, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	row := st.rows[filepath.Join(root, "a.mkv")]
	st.mu.Unlock()
	if row.CID != want || row.MtimeNano != fi.ModTime().UnixNano() {
		t.Fatalf("row %s (mtime %d), file on disk %s (mtime %d): the scan's stale hash won", row.CID, row.MtimeNano, want, fi.ModTime().UnixNano())
	}
}

// TestSettle_DeletedWhileHashedStaysDeleted: a file the event loop saw
// vanish while a scan hashed it is deleted, not brought back by the scan.
func TestSettle_DeletedWhileHashedStaysDeleted(t *testing.T) {
	root := t.TempDir()
	w, st := raceWatcher(t, root)
	ctx := context.Background()
	if err := w.settle(ctx, []fileStat{writeAt(t, root, "a.mkv", "v0", 0)}, nil); err != nil {
		t.Fatal(err)
	}
	hashed, tk := scanFirstHalf(t, w, []fileStat{writeAt(t, root, "a.mkv", "v1 changed", 1)})
	if err := os.Remove(filepath.Join(root, "a.mkv")); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	w.mu.Lock()
	w.view.vanish("a.mkv", now, false) // the event loop's flush: held for a rename, due now
	w.mu.Unlock()
	scanSecondHalf(t, w, hashed, tk)
	if err := w.expireGone(ctx, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if st.has(filepath.Join(root, "a.mkv")) {
		t.Fatal("the deleted file's row is back")
	}
	if len(w.view.gone) != 0 || len(w.view.known) != 0 {
		t.Fatalf("view: %d known, %d gone; want neither", len(w.view.known), len(w.view.gone))
	}
}
