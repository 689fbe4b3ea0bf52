package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metanode/metanode/store"
)

// TestOpen_DamagedTruth: a truth file that is not an SQLite database (a
// bad copy, a disk error) is refused with ErrDamaged and a message that
// says what to do, and is left as it was.
func TestOpen_DamagedTruth(t *testing.T) {
	dir := t.TempDir()
	truth := filepath.Join(dir, "truth.db")
	junk := []byte(strings.Repeat("not an sqlite file ", 512))
	if err := os.WriteFile(truth, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	s := store.New(store.Config{TruthPath: truth, CachePath: filepath.Join(dir, "cache.db")})
	err := s.Open(context.Background())
	if err == nil {
		_ = s.Close()
		t.Fatal("a damaged truth file opened")
	}
	if !errors.Is(err, store.ErrDamaged) || !strings.Contains(err.Error(), "restore truth.db from a backup") {
		t.Fatalf("error %q: want ErrDamaged with what to do", err)
	}
	if got, _ := os.ReadFile(truth); string(got) != string(junk) {
		t.Error("the damaged file was changed")
	}
}
