package store_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
)

// TestLoadSigner_NotAKey: an empty, garbled or cut-short key file is
// ErrBadKeyFile, and the message names the file; a key written by
// WriteFile reads back, and WriteFile never overwrites.
func TestLoadSigner_NotAKey(t *testing.T) {
	dir := t.TempDir()
	sg, err := store.GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "plugin.key")
	if err := sg.WriteFile(good); err != nil {
		t.Fatal(err)
	}
	back, err := store.LoadSigner(good)
	if err != nil || back.UID() != sg.UID() {
		t.Fatalf("read back: %v", err)
	}
	if err := sg.WriteFile(good); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("a second write: %v, want fs.ErrExist", err)
	}
	for name, content := range map[string]string{
		"empty":     "",
		"newline":   "\n",
		"garbage":   "\x00\xffnot a key at all",
		"truncated": sg.PrivateHex()[:40],
		"zero":      strings.Repeat("0", 64),
	} {
		path := filepath.Join(dir, name+".key")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := store.LoadSigner(path)
		if !errors.Is(err, store.ErrBadKeyFile) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a metanode key") {
			t.Errorf("%s: %v, want ErrBadKeyFile naming %s", name, err, path)
		}
	}
	if _, err := store.LoadSigner(filepath.Join(dir, "missing.key")); !errors.Is(err, fs.ErrNotExist) || errors.Is(err, store.ErrBadKeyFile) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
	}
}

// TestRemoveStaleKeyTemps: the temporary files a key write leaves when its
// process dies part-way are removed by the next write of that key (and by
// RemoveStaleKeyTemps, which the node calls when it loads its key), those
// of a write still under way (recent) and other files are not.
func TestRemoveStaleKeyTemps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "node.key")
	old := time.Now().Add(-time.Hour)
	put := func(name string, mtime time.Time) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("part of a key"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stale := put(".node.key.tmp-123", old)
	live := put(".node.key.tmp-456", time.Now())
	other := put(".other.key.tmp-789", old)
	sg, err := store.GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	if err := sg.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	if exists(stale) {
		t.Error("the stale temporary file of node.key is still there after a write of node.key")
	}
	if !exists(live) || !exists(other) {
		t.Errorf("a recent temporary file (%v) or another key's (%v) went", exists(live), exists(other))
	}
	again := put(".node.key.tmp-abc", old)
	if n := store.RemoveStaleKeyTemps(path); n != 1 || exists(again) {
		t.Errorf("RemoveStaleKeyTemps removed %d, want 1 (the stale one; still there: %v)", n, exists(again))
	}
}
