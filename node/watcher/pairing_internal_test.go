package watcher

import (
	"log/slog"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// TestClassify_Pairing pins which new file pairs with a vanished one
// without hashing: only the same inode, size and mtime, with the old
// name's events saying it was moved. A deleted file's inode can be reused
// at once by another file (ext4 does), so the inode is not enough then;
// and a row loaded from the store has none.
func TestClassify_Pairing(t *testing.T) {
	ino := fileID{dev: 1, ino: 42}
	row := entry{cid: "bold", size: 8, mtime: 1, id: ino}
	for _, c := range []struct {
		name   string
		gone   entry
		moved  bool
		f      fileStat
		rename bool // paired unhashed; otherwise hashed
	}{
		{"moved", row, true, fileStat{rel: "b", size: 8, mtime: 1, id: ino}, true},
		{"deleted, inode reused", row, false, fileStat{rel: "b", size: 8, mtime: 1, id: ino}, false},
		{"moved, other inode", row, true, fileStat{rel: "b", size: 8, mtime: 1, id: fileID{1, 43}}, false},
		{"moved, other mtime", row, true, fileStat{rel: "b", size: 8, mtime: 2, id: ino}, false},
		{"row without inode", entry{cid: "bold", size: 8, mtime: 1}, true, fileStat{rel: "b", size: 8, mtime: 1, id: ino}, false},
		{"file without inode", row, true, fileStat{rel: "b", size: 8, mtime: 1}, false},
		{"moved back", row, true, fileStat{rel: "a", size: 8, mtime: 1, id: ino}, true},
		{"deleted, made again", row, false, fileStat{rel: "a", size: 8, mtime: 1, id: ino}, false},
		{"moved back, name relinked", row, true, fileStat{rel: "a", size: 8, mtime: 1, id: ino, relinked: true}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := New(Config{Root: "/r", Store: &rowStore{}, Logger: slog.New(slog.DiscardHandler)})
			w.rootAbs = "/r"
			w.view.known["a"] = c.gone
			w.view.vanish("a", time.Now(), c.moved)
			ups, need := w.classifyLocked([]fileStat{c.f}, w.view.ticket())
			paired := len(need) == 0
			if paired != c.rename {
				t.Fatalf("paired without hashing: %v, want %v (updates %v)", paired, c.rename, ups)
			}
			if c.rename && c.f.rel != "a" && (len(ups) != 1 || ups[0].EventOld != "a" || ups[0].File.CID != "bold") {
				t.Errorf("updates %+v, want one rename from a keeping its cid", ups)
			}
		})
	}
}

// TestClassify_KnownPath pins when a file at a known path is taken as
// unchanged (no hash): same size and mtime, on a live look the same inode
// when both are known, and no event that removed the name meanwhile. The
// row learns the inode then.
func TestClassify_KnownPath(t *testing.T) {
	ino := fileID{dev: 1, ino: 42}
	for _, c := range []struct {
		name      string
		row       entry
		f         fileStat
		unchanged bool
	}{
		{"same", entry{"c", 8, 1, ino}, fileStat{rel: "a", size: 8, mtime: 1, id: ino, inodeSays: true}, true},
		{"other inode (renamed over)", entry{"c", 8, 1, ino}, fileStat{rel: "a", size: 8, mtime: 1, id: fileID{1, 7}, inodeSays: true}, false},
		{"name relinked, inode reused", entry{"c", 8, 1, ino}, fileStat{rel: "a", size: 8, mtime: 1, id: ino, relinked: true, inodeSays: true}, false},
		{"other size", entry{"c", 8, 1, ino}, fileStat{rel: "a", size: 9, mtime: 1, id: ino, inodeSays: true}, false},
		{"row from the store", entry{"c", 8, 1, fileID{}}, fileStat{rel: "a", size: 8, mtime: 1, id: ino}, true},
		// A scan: an inode numbered anew by the file system (rclone's
		// FUSE mount, SMB noserverino) is no change; the row learns it.
		{"scan, inode numbered anew", entry{"c", 8, 1, ino}, fileStat{rel: "a", size: 8, mtime: 1, id: fileID{1, 7}}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := New(Config{Root: "/r", Store: &rowStore{}, Logger: slog.New(slog.DiscardHandler)})
			w.rootAbs = "/r"
			w.view.known["a"] = c.row
			ups, need := w.classifyLocked([]fileStat{c.f}, w.view.ticket())
			if got := len(ups) == 0 && len(need) == 0; got != c.unchanged {
				t.Fatalf("unchanged: %v, want %v", got, c.unchanged)
			}
			if c.unchanged && w.view.known["a"].id != c.f.id {
				t.Errorf("row inode %v, want %v learned", w.view.known["a"].id, c.f.id)
			}
		})
	}
}

// TestNote_MovedOrRelinked: a path's events since it was last looked at
// say whether its file was moved (its inode lives on elsewhere) and
// whether a file there now is another directory entry.
func TestNote_MovedOrRelinked(t *testing.T) {
	for _, c := range []struct {
		ops             []fsnotify.Op
		moved, relinked bool
	}{
		{[]fsnotify.Op{fsnotify.Rename}, true, true},
		{[]fsnotify.Op{fsnotify.Write, fsnotify.Chmod, fsnotify.Rename}, true, true},
		{[]fsnotify.Op{fsnotify.Remove}, false, true},
		{[]fsnotify.Op{fsnotify.Rename, fsnotify.Create, fsnotify.Remove}, false, true},
		{[]fsnotify.Op{fsnotify.Create, fsnotify.Rename}, false, true}, // renamed over first: the row's inode was freed
		{[]fsnotify.Op{fsnotify.Remove, fsnotify.Create}, false, true},
		{[]fsnotify.Op{fsnotify.Create}, false, false},
		{[]fsnotify.Op{fsnotify.Write}, false, false},
	} {
		w := New(Config{Root: "/r", Store: &rowStore{}, Logger: slog.New(slog.DiscardHandler)})
		w.rootAbs = "/r"
		pending := map[string]pend{}
		for _, op := range c.ops {
			w.note(fsnotify.Event{Name: "/r/a", Op: op}, pending)
		}
		if p := pending["a"]; p.moved() != c.moved || p.relinked() != c.relinked {
			t.Errorf("%v: moved %v, relinked %v; want %v, %v", c.ops, p.moved(), p.relinked(), c.moved, c.relinked)
		}
	}
}
