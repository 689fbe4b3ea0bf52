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

// TestTrustChange_DuplicateClaimByPID: a catch-up can list a claim twice
// in claim_by_pid (recover.go); a trust change then meets it twice, and the
// sync set must still lose and regain exactly the signer's claims.
func TestTrustChange_DuplicateClaimByPID(t *testing.T) {
	ctx := context.Background()
	v, _ := GenerateSigner()
	o, _ := GenerateSigner()
	dir := t.TempDir()
	cfg := Config{TruthPath: filepath.Join(dir, "t.db"), CachePath: filepath.Join(dir, "c.db"), Trust: TrustOpen,
		Logger: slog.New(slog.DiscardHandler)}
	s := New(cfg)
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var cs []Claim
	for i := range 20 {
		cs = append(cs, v.Text(testCID(i), "title", "by v", uint64(10+i)), o.Text(testCID(i), "year", "2001", uint64(10+i)))
	}
	if _, err := s.Submit(ctx, cs, SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	<-s.SyncReady()
	// Every entry listed twice, under another seq, as a catch-up leaves it.
	db, err := openDB(cfg.CachePath, cacheWriter, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.ExecContext(ctx, `INSERT INTO claim_by_pid(pid, seq, cid, key) SELECT pid, seq + 1000000, cid, key FROM claim_by_pid`)
	if n, _ := res.RowsAffected(); err != nil || n != 40 {
		t.Fatalf("duplicating claim_by_pid: %d rows, %v", n, err)
	}
	db.Close()

	if n := s.sync.Len(); n != 40 {
		t.Fatalf("sync set before: %d items, want 40", n)
	}
	if err := s.Distrust(ctx, v.UID()); err != nil {
		t.Fatal(err)
	}
	if n := s.sync.Len(); n != 20 {
		t.Fatalf("sync set after distrust: %d items, want 20 (o's)", n)
	}
	if _, err := s.Field(ctx, testCID(3), "title"); err == nil {
		t.Fatal("the distrusted signer's title still counts")
	}
	if err := s.Trust(ctx, v.UID(), ""); err != nil {
		t.Fatal(err)
	}
	if n := s.sync.Len(); n != 40 {
		t.Fatalf("sync set after trusting again: %d items, want 40", n)
	}
	want := NewSyncSet()
	for _, c := range cs {
		want.Add(SyncItem{TS: c.TS, ID: c.ID()})
	}
	if got, exp := s.sync.Summary(MinSyncItem, MaxSyncItem), want.Summary(MinSyncItem, MaxSyncItem); got != exp {
		t.Fatal("sync set after trusting again differs from the claims'")
	}
	if got, err := s.Field(ctx, testCID(3), "title"); err != nil || got != "by v" {
		t.Fatalf("title after trusting again: %q %v", got, err)
	}
}
