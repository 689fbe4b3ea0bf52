package store

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// TestCatchUp_VouchRetractedInLostBatch: a vouch retraction whose cache
// transaction failed (as a kill between the two commits would leave it)
// still removes the signer's votes once the cache catches up, and after a
// restart: a catch-up cannot replay it claim by claim, so it rebuilds.
func TestCatchUp_VouchRetractedInLostBatch(t *testing.T) {
	ctx := context.Background()
	own, _ := GenerateSigner()
	v, _ := GenerateSigner()
	dir := t.TempDir()
	cfg := Config{TruthPath: filepath.Join(dir, "t.db"), CachePath: filepath.Join(dir, "c.db"), Trust: TrustList,
		OwnUID: own.UID(), Logger: slog.New(slog.DiscardHandler)}
	s := New(cfg)
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	peer, _ := PeerIDCID(own.UID())
	for _, c := range []Claim{own.Text(peer, "vouch/"+v.UID(), "true", 1), v.Text(testCID(1), "title", "by v", 2)} {
		if _, err := s.Submit(ctx, []Claim{c}, SubmitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.Field(ctx, testCID(1), "title"); err != nil || got != "by v" {
		t.Fatalf("vouched vote: %q %v", got, err)
	}
	failed := false
	s.failCache = func() error {
		if failed {
			return nil
		}
		failed = true
		return errors.New("cache transaction lost")
	}
	if _, err := s.Submit(ctx, []Claim{own.Retraction(peer, "vouch/"+v.UID(), 3)}, SubmitOptions{}); err == nil {
		t.Fatal("the cache failure did not surface")
	}
	if _, err := s.Submit(ctx, []Claim{own.Text(testCID(2), "title", "x", 4)}, SubmitOptions{}); err != nil {
		t.Fatal(err) // this batch catches the cache up first
	}
	if got, err := s.Field(ctx, testCID(1), "title"); err == nil {
		t.Fatalf("after the catch-up the unvouched signer's vote still counts: %q", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = New(cfg)
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.Field(ctx, testCID(1), "title"); err == nil {
		t.Fatalf("after a restart the unvouched signer's vote still counts: %q", got)
	}
}

// TestRebuild_NewCacheGapsFileCursors: a deleted cache takes the files
// stream's events with it, so a cursor into them gets a Gap (as meta
// cursors do), not a silent resume that skips what was lost.
func TestRebuild_NewCacheGapsFileCursors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := Config{TruthPath: filepath.Join(dir, "t.db"), CachePath: filepath.Join(dir, "c.db"), Trust: TrustOpen,
		Logger: slog.New(slog.DiscardHandler)}
	s := New(cfg)
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	sub, err := s.Subscribe(StreamFiles, "")
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range []string{"/f/a.mkv", "/f/b.mkv"} {
		if _, err := s.ApplyFiles(ctx, []FileUpdate{{Op: FileAdd, File: LocalFile{Path: p, CID: testCID(10 + i), Size: 5, MtimeNano: 1}, EventPath: p}}); err != nil {
			t.Fatal(err)
		}
	}
	first := <-sub.C
	sub.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, suf := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(cfg.CachePath + suf); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	s = New(cfg)
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.ApplyFiles(ctx, []FileUpdate{{Op: FileAdd, File: LocalFile{Path: "/f/c.mkv", CID: testCID(12), Size: 5, MtimeNano: 1}, EventPath: "/f/c.mkv"}}); err != nil {
		t.Fatal(err)
	}
	resumed, err := s.Subscribe(StreamFiles, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	if resumed.Gap == nil {
		t.Fatal("a files cursor into the lost cache resumed without a Gap (b.mkv's add is silently gone)")
	}
}
