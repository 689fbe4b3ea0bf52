package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// tinyDisk mounts a tmpfs of size bytes for the test: a real file system
// that fills up. It skips the test, saying why, where mounting is not
// allowed (not root, or a container without CAP_SYS_ADMIN).
func tinyDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root and CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a file until the disk holding dir is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return p
		}
	}
}

// TestOpen_FullDiskSaysWhatToDo: a store whose cache missed a batch (its
// cache transaction failed) is closed and its disk, a real tmpfs, filled;
// the next start must write (the WAL's shared memory, the cache's
// catch-up), and fails saying that the disk is full, which one, and to
// free space and start again, not only SQLite's "disk I/O error" or
// "database or disk is full". Once space is freed the start catches up and
// the claims are all there.
func TestOpen_FullDiskSaysWhatToDo(t *testing.T) {
	dir := tinyDisk(t, "8m")
	cfg := store.Config{TruthPath: filepath.Join(dir, "truth.db"), CachePath: filepath.Join(dir, "cache.db"), Trust: store.TrustOpen, Now: testNow}
	s := reopen(t, cfg)
	signer := storetest.Signer(1)
	var claims []store.Claim
	for i := range 200 {
		claims = append(claims, signer.Text(storetest.MidhashCID(7000+i), "title", strings.Repeat("t", 200), 1_700_000_000_000))
	}
	store.FailNextCache(s)
	if _, err := s.Submit(ctx, claims, store.SubmitOptions{}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("the batch whose cache transaction fails: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	filler := fill(t, dir)

	err := store.New(cfg).Open(ctx)
	if err == nil {
		t.Fatal("the start on a full disk worked: the test no longer needs a write at start")
	}
	for _, want := range []string{"is full", dir, "free space there and start the node again"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("start on a full disk: %v\nwant it to say %q", err, want)
		}
	}
	if strings.Count(err.Error(), "free space") != 1 {
		t.Fatalf("the advice is repeated: %v", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, cfg)
	defer s.Close()
	if n, err := s.RIDs(ctx); err != nil || len(n) != len(claims) {
		t.Fatalf("after freeing space: %d records (%v), want %d", len(n), err, len(claims))
	}
}
