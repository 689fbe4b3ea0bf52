package watcher_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/metanode/metanode/node/watcher"
	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// feed collects a real store's file events.
type feed struct {
	mu   sync.Mutex
	evs  []map[string]string
	done chan struct{}
}

// follow subscribes to file:events from the start until the test ends.
func follow(t *testing.T, s *store.Store) *feed {
	t.Helper()
	sub, err := s.Subscribe(store.StreamFiles, "0-0")
	if err != nil {
		t.Fatal(err)
	}
	f := &feed{done: make(chan struct{})}
	go func() {
		defer close(f.done)
		for ev := range sub.C {
			var m map[string]string // event data values are strings
			if err := json.Unmarshal(ev.Data, &m); err != nil {
				t.Errorf("event %s: %v", ev.Data, err)
				continue
			}
			if m["type"] != ev.Type {
				t.Errorf("event type %q, data type %q", ev.Type, m["type"])
			}
			f.mu.Lock()
			f.evs = append(f.evs, m)
			f.mu.Unlock()
		}
	}()
	t.Cleanup(func() { sub.Close(); <-f.done })
	return f
}

func (f *feed) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.evs)
}

// ops renders events from i on like memStore.ops.
func (f *feed) ops(i int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, m := range f.evs[i:] {
		if m["type"] == "rename" {
			out = append(out, fmt.Sprintf("rename %s>%s", m["oldPath"], m["path"]))
		} else {
			out = append(out, fmt.Sprintf("%s %s", m["type"], m["path"]))
		}
	}
	return out
}

func (f *feed) last() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.evs[len(f.evs)-1]
}

// rowsOf reads the store's local_file rows as "rel cid size mtime".
func rowsOf(t *testing.T, s *store.Store, root string) []string {
	t.Helper()
	rows, err := s.LocalFiles(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		rel, _ := filepath.Rel(root, r.Path)
		out = append(out, fmt.Sprintf("%s %s %d %d", filepath.ToSlash(rel), r.CID, r.Size, r.MtimeNano))
	}
	slices.Sort(out)
	return out
}

func rowOf(t *testing.T, root, rel string) string {
	p := filepath.Join(root, filepath.FromSlash(rel))
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s %s %d %d", rel, midhash(t, p), st.Size(), st.ModTime().UnixNano())
}

// TestStore_EndToEnd runs the watcher against the real store: the initial
// scan, each live change, the file events a consumer sees and the record's
// box-local fields.
func TestStore_EndToEnd(t *testing.T) {
	s := storetest.Open(t, store.Config{})
	ev := follow(t, s)
	root := t.TempDir()
	writeFile(t, root, "a.bin", []byte("alpha"), at(1))
	writeFile(t, root, "sub/b.bin", []byte("bravo"), at(2))
	w := open(t, root, s, renameDebounce) // it renames too

	if d := diffStrings(rowsOf(t, s, root), []string{rowOf(t, root, "a.bin"), rowOf(t, root, "sub/b.bin")}); d != "" {
		t.Fatalf("rows after the initial scan:\n%s", d)
	}
	waitFor(t, "two add events", func() bool { return ev.len() == 2 })
	if d := diffStrings(ev.ops(0), []string{"add a.bin", "add sub/b.bin"}); d != "" {
		t.Errorf("events:\n%s", d)
	}
	if m := ev.last(); m["size"] != "5" || m["midhash256"] != midhash(t, filepath.Join(root, "sub/b.bin")) || m["timestamp"] == "" {
		t.Errorf("add event data %v", m)
	}

	// The record holding b.bin's cid carries its box-local fields.
	fields := func(rel string) map[string]string {
		t.Helper()
		rid, err := s.Resolve(t.Context(), midhash(t, filepath.Join(root, rel)))
		if err != nil {
			t.Fatal(err)
		}
		rec, err := s.Record(t.Context(), rid, "")
		if err != nil {
			t.Fatal(err)
		}
		return rec.Fields
	}
	if f := fields("sub/b.bin"); f["filePath"] != filepath.Join(root, "sub/b.bin") || f["sizeByte"] != "5" ||
		f["mtimeNano"] != strconv.FormatInt(at(2).UnixNano(), 10) {
		t.Errorf("record fields %v", f)
	}

	step := func(name string, want []string, do func()) {
		t.Helper()
		mark := ev.len()
		do()
		waitFor(t, name, func() bool { return ev.len() >= mark+len(want) })
		if d := diffStrings(ev.ops(mark), want); d != "" {
			t.Errorf("%s events:\n%s", name, d)
		}
	}
	step("modify", []string{"change a.bin"}, func() { writeFile(t, root, "a.bin", []byte("ALPHA!"), at(3)) })
	hashed := w.Stats().Hashed
	step("rename", []string{"rename sub/b.bin>c.bin"}, func() {
		if err := os.Rename(filepath.Join(root, "sub/b.bin"), filepath.Join(root, "c.bin")); err != nil {
			t.Fatal(err)
		}
	})
	if w.Stats().Hashed != hashed {
		t.Error("the rename was hashed")
	}
	if f := fields("c.bin"); f["filePath"] != filepath.Join(root, "c.bin") {
		t.Errorf("filePath after rename: %q", f["filePath"])
	}
	step("delete", []string{"delete c.bin"}, func() {
		if err := os.Remove(filepath.Join(root, "c.bin")); err != nil {
			t.Fatal(err)
		}
	})
	if d := diffStrings(rowsOf(t, s, root), []string{rowOf(t, root, "a.bin")}); d != "" {
		t.Errorf("rows at the end:\n%s", d)
	}

	// A restart over the same store hashes and writes nothing.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w2 := open(t, root, s)
	if st := w2.Stats(); st.Hashed != 0 || st.Applied != 0 || st.Files != 1 {
		t.Errorf("restart: %+v, want nothing hashed or applied, 1 file", st)
	}
}

// TestStore_Register: POST /api/files/register's path through the real
// store: created once, then not (and no second event).
func TestStore_Register(t *testing.T) {
	s := storetest.Open(t, store.Config{})
	ev := follow(t, s)
	root := t.TempDir()
	w := open(t, root, s, func(c *watcher.Config) { c.Debounce = 1 << 62 }) // the loop stays out of it
	p := writeFile(t, root, "plugin/x.nfo", []byte("<nfo/>"), at(1))

	lf, res, err := w.Register(t.Context(), "plugin/x.nfo")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created || !store.IsRID(res.RID) || lf.Path != p || lf.CID != midhash(t, p) || lf.Size != 6 {
		t.Fatalf("register: %+v %+v", lf, res)
	}
	if rid, err := s.Resolve(t.Context(), lf.CID); err != nil || rid != res.RID {
		t.Errorf("resolve %s: %s, %v; want %s", lf.CID, rid, err, res.RID)
	}
	applied := w.Stats().Applied
	_, res2, err := w.Register(t.Context(), "plugin/x.nfo")
	if err != nil {
		t.Fatal(err)
	}
	if res2.Created || res2.RID != res.RID || w.Stats().Applied != applied {
		t.Errorf("second register: %+v (applied %d → %d), want not created, same rid, nothing written",
			res2, applied, w.Stats().Applied)
	}
	waitFor(t, "the add event", func() bool { return ev.len() >= 1 })
	if d := diffStrings(ev.ops(0), []string{"add plugin/x.nfo"}); d != "" {
		t.Errorf("events:\n%s", d)
	}

	// New content at the same path: a new record, so created again.
	writeFile(t, root, "plugin/x.nfo", []byte("<nfo>2</nfo>"), at(2))
	lf3, res3, err := w.Register(t.Context(), "plugin/x.nfo")
	if err != nil {
		t.Fatal(err)
	}
	if !res3.Created || res3.RID == res.RID || lf3.CID == lf.CID {
		t.Errorf("changed file: %+v %+v", lf3, res3)
	}
}

// TestStore_OfflineMove: a directory moved while the node was down comes
// back as renames, keeping each file's record. Each moved file is hashed
// once: the store keeps no inode, so only the cid can pair it.
func TestStore_OfflineMove(t *testing.T) {
	s := storetest.Open(t, store.Config{})
	root := t.TempDir()
	for i := range 5 {
		writeFile(t, root, fmt.Sprintf("show/s01e%02d.mkv", i), []byte{byte(i), 1, 2, 3}, at(i))
	}
	w := open(t, root, s)
	before := map[string]string{}
	for i := range 5 {
		c := midhash(t, filepath.Join(root, fmt.Sprintf("show/s01e%02d.mkv", i)))
		rid, err := s.Resolve(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		before[c] = rid
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root, "show"), filepath.Join(root, "Show (2024)")); err != nil {
		t.Fatal(err)
	}
	ev := follow(t, s)
	mark := 5 // the five adds of the first run
	w2 := open(t, root, s)
	if h := w2.Stats().Hashed; h != 5 {
		t.Errorf("hashed %d after a move, want 5 (one midhash each)", h)
	}
	waitFor(t, "five renames", func() bool { return ev.len() >= mark+5 })
	for _, op := range ev.ops(mark) {
		if op[:7] != "rename " {
			t.Errorf("event %q, want renames only", op)
		}
	}
	for c, rid := range before {
		if got, err := s.Resolve(t.Context(), c); err != nil || got != rid {
			t.Errorf("cid %s: rid %s, %v; want %s (same record)", c, got, err, rid)
		}
	}
}
