package store

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
)

// checkFileHasRecord: a registered local file still has a group and a
// record (the watcher skips an unchanged file, so nothing else would ever
// give it one back).
func checkFileHasRecord(t *testing.T, s *Store, path, cid string) {
	t.Helper()
	ctx := context.Background()
	lf, err := s.LocalFiles(ctx)
	if err != nil || len(lf) != 1 || lf[0].Path != path {
		t.Fatalf("local files %+v, %v", lf, err)
	}
	if has, _ := s.HasCID(ctx, cid); !has {
		t.Errorf("the local file's cid has no group")
	}
	if _, err := s.Record(ctx, cid, ""); err != nil {
		t.Errorf("the local file's record: %v", err)
	}
	tuples, _, err := s.FileTuples(ctx)
	if err != nil || len(tuples) != 1 || tuples[0].RID == "" {
		t.Errorf("file tuples %+v, %v", tuples, err)
	}
}

// TestClearInterrupted_LocalFilesKeepRecords: Clear commits truth (claims,
// groups) first, then the cache (local_file, scratch keys, streams). When
// the cache half fails (a kill, disk full), the rebuild that follows,
// after a restart or as the next batch's catch-up, gives every local file
// still in local_file a group in truth again, and so a record.
func TestClearInterrupted_LocalFilesKeepRecords(t *testing.T) {
	for _, restart := range []bool{true, false} {
		name := "CatchUp"
		if restart {
			name = "Restart"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			cfg := Config{TruthPath: filepath.Join(dir, "t.db"), CachePath: filepath.Join(dir, "c.db"), Trust: TrustOpen,
				Logger: slog.New(slog.DiscardHandler)}
			s := New(cfg)
			if err := s.Open(ctx); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			fileCID := testCID(90)
			const path = "/files/a.mkv"
			if _, err := s.ApplyFiles(ctx, []FileUpdate{{Op: FileAdd, File: LocalFile{Path: path, CID: fileCID, Size: 10, MtimeNano: 5}}}); err != nil {
				t.Fatal(err)
			}
			sg, _ := GenerateSigner()
			if _, err := s.Submit(ctx, []Claim{sg.Text(testCID(91), "title", "gone", 1)}, SubmitOptions{}); err != nil {
				t.Fatal(err)
			}
			s.failCache = func() error { return errors.New("killed") }
			if _, err := s.Clear(ctx); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("clear with a failing cache: %v", err)
			}
			s.failCache = nil
			if restart {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				s = New(cfg)
				if err := s.Open(ctx); err != nil {
					t.Fatal(err)
				}
			} else if _, err := s.Submit(ctx, []Claim{sg.Text(testCID(92), "title", "new", 2)}, SubmitOptions{}); err != nil {
				t.Fatal(err) // its catch-up is the rebuild
			}
			checkFileHasRecord(t, s, path, fileCID)
			if _, err := s.Record(ctx, testCID(91), ""); !errors.Is(err, ErrNotFound) {
				t.Errorf("a cleared claim's record: %v", err)
			}
		})
	}
}
