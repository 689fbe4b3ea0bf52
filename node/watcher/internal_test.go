package watcher

import (
	"errors"
	"path"
	"path/filepath"
	"strings"
	"testing"

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
