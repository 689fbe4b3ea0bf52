package store_test

import (
	"os"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// TestTruthRestored_LocalFilesKeepRecords: truth restored from a backup
// older than a file's registration (a documented recovery: the cache is
// then ahead and rebuilt) lacks the file's group; the rebuild gives the
// cid a group again, so the file keeps its record, and the cache is what
// a rebuild of the (repaired) truth gives.
func TestTruthRestored_LocalFilesKeepRecords(t *testing.T) {
	tp, cp := paths(t)
	cfg := store.Config{TruthPath: tp, CachePath: cp}
	s := reopen(t, cfg)
	submit(t, s, storetest.Signer(0).Text(storetest.CID(4100), "title", "kept", 1))
	s.Close()
	backup := t.TempDir() + "/truth-backup.db"
	copyFile(t, tp, backup)
	s = reopen(t, cfg)
	cid := storetest.MidhashCID(4101)
	if _, err := s.ApplyFiles(ctx, []store.FileUpdate{{Op: store.FileAdd, File: store.LocalFile{Path: "/files/new.mkv", CID: cid, Size: 3, MtimeNano: 4}}}); err != nil {
		t.Fatal(err)
	}
	submit(t, s, storetest.Signer(0).Text(storetest.CID(4102), "title", "lost with the restore", 2))
	s.Close()
	for _, suf := range []string{"-wal", "-shm"} {
		_ = os.Remove(tp + suf)
	}
	copyFile(t, backup, tp)
	s = reopen(t, cfg)
	lf, _ := s.LocalFiles(ctx)
	rec, err := s.Record(ctx, cid, "")
	if len(lf) != 1 || err != nil || rec.Fields["filePath"] == "" {
		t.Fatalf("after restoring truth: local files %+v, the file's record %v (%v)", lf, rec.Fields, err)
	}
	record(t, s, storetest.CID(4100))
	st, _ := s.Stats(ctx)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if st.AppliedSeq != st.LastSeq {
		t.Fatalf("applied %d of %d", st.AppliedSeq, st.LastSeq)
	}
	diffMaps(t, dumpCache(t, cp), rebuilt(t, tp, cp))
}
