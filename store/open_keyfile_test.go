package store_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
