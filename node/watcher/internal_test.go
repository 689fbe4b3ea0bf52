package watcher

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
)

func TestIgnoredRel(t *testing.T) {
	for rel, want := range map[string]bool{
		"a.mkv":                   false,
		"dir/a.mkv":               false,
		"dir.part/a.mkv":          false, // the suffix rule is for files only
		".hidden":                 true,
		"dir/.hidden":             true,
		".dir/a.mkv":              true,
		"a/.b/c/d.mkv":            true,
		"a.mkv.part":              true,
		"a.mkv.partial":           true,
		"a.mkv.crdownload":        true,
		"a.mkv.!qB":               true,
		"a.part.mkv":              false,
		"plugin/out.bin":          false,
		"plugin/.syncthing.x.tmp": true,
	} {
		if got := ignoredRel(rel); got != want {
			t.Errorf("ignoredRel(%q) = %v, want %v", rel, got, want)
		}
	}
}

func TestRelOf(t *testing.T) {
	w := &Watcher{rootAbs: filepath.FromSlash("/files")}
	for abs, want := range map[string]string{
		"/files/a":      "a",
		"/files/a/b/":   "a/b",
		"/files/a/../b": "b",
		"/files":        "",
		"/filesx/a":     "",
		"/other/a":      "",
		"/files/../x":   "",
	} {
		got, ok := w.relOf(filepath.FromSlash(abs))
		if want == "" && ok && got != "." || want != "" && got != want {
			t.Errorf("relOf(%q) = %q, %v; want %q", abs, got, ok, want)
		}
	}
}

// FuzzCleanRel: whatever the api passes, Register either refuses it with
// store.ErrBadPath or gets a clean path that stays inside the root and
// names a file the watcher indexes.
func FuzzCleanRel(f *testing.F) {
	for _, s := range []string{
		"plugin/a", "plugin/../a", "../a", "/abs", "", ".", "a//b", "a/./b",
		"plugin/.h", "a\x00b", "C:\\x", "a/b/..", "..", "a/..\\..", "a.part",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rel string) {
		clean, err := cleanRel(rel)
		if err != nil {
			if !errors.Is(err, store.ErrBadPath) {
				t.Fatalf("cleanRel(%q): %v does not wrap ErrBadPath", rel, err)
			}
			return
		}
		switch {
		case clean == "" || clean == "." || path.IsAbs(clean) || filepath.IsAbs(clean):
			t.Fatalf("cleanRel(%q) = %q: not a relative file path", rel, clean)
		case clean == ".." || strings.HasPrefix(clean, "../") || strings.Contains(clean, "/../"):
			t.Fatalf("cleanRel(%q) = %q leaves the root", rel, clean)
		case path.Clean(clean) != clean || strings.ContainsRune(clean, 0):
			t.Fatalf("cleanRel(%q) = %q is not clean", rel, clean)
		case ignoredRel(clean):
			t.Fatalf("cleanRel(%q) = %q is an ignored name", rel, clean)
		}
	})
}

// rowStore is the smallest Store: rows by path.
type rowStore struct {
	mu   sync.Mutex
	rows map[string]store.LocalFile
}

func (s *rowStore) ApplyFiles(_ context.Context, ups []store.FileUpdate) ([]store.FileResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range ups {
		delete(s.rows, u.OldPath)
		if u.Op == store.FileDelete {
			delete(s.rows, u.File.Path)
		} else {
			s.rows[u.File.Path] = u.File
		}
	}
	return make([]store.FileResult, len(ups)), nil
}

func (s *rowStore) LocalFiles(context.Context) ([]store.LocalFile, error) { return nil, nil }

func (s *rowStore) Resolve(context.Context, string) (string, error) { return "", store.ErrNotFound }

func (s *rowStore) has(p string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.rows[p]
	return ok
}

// TestRescan_SafetyNet: a change fsnotify never reports (its directory's
// watch is gone) is found by the periodic rescan, which also re-watches
// the directory.
func TestRescan_SafetyNet(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	st := &rowStore{rows: map[string]store.LocalFile{}}
	w := New(Config{Root: root, Store: st, Debounce: 10 * time.Millisecond, Rescan: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err := w.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	<-w.Ready()
	if err := w.fsw.Remove(filepath.Join(root, "sub")); err != nil {
		t.Fatal(err)
	}
	scans := w.Stats().Scans
	p := filepath.Join(root, "sub", "missed.bin")
	if err := os.WriteFile(p, []byte("missed"), 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); !st.has(p); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the rescan did not find the file")
		}
	}
	for deadline := time.Now().Add(20 * time.Second); w.Stats().Scans == scans; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the rescan did not finish")
		}
	}
	// The rescan watched sub again: a change there is now seen live.
	if !slices.Contains(w.fsw.WatchList(), filepath.Join(root, "sub")) {
		t.Error("sub is not watched after the rescan")
	}
}
