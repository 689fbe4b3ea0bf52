package store_test

import (
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

func applyFiles(t *testing.T, s *store.Store, ups ...store.FileUpdate) []store.FileResult {
	t.Helper()
	res, err := s.ApplyFiles(ctx, ups)
	if err != nil {
		t.Fatalf("apply files: %v", err)
	}
	return res
}

func lf(path, cid string, size int64) store.LocalFile {
	return store.LocalFile{Path: path, CID: cid, Size: size, MtimeNano: size * 10}
}

func TestFiles_BoxLocalFields(t *testing.T) {
	s := open(t, store.Config{})
	m1, m2 := storetest.MidhashCID(1), storetest.MidhashCID(2)
	files, err := s.Subscribe(store.StreamFiles, "")
	if err != nil {
		t.Fatal(err)
	}
	defer files.Close()

	res := applyFiles(t, s, store.FileUpdate{Op: store.FileAdd, File: lf("/f/b.mkv", m1, 700), EventPath: "b.mkv"})
	if !res[0].Created || !store.IsRID(res[0].RID) {
		t.Fatalf("add result=%+v", res[0])
	}
	rec := record(t, s, m1)
	if rec.RID != res[0].RID || rec.Fields["filePath"] != "/f/b.mkv" || rec.Fields["sizeByte"] != "700" || rec.Fields["mtimeNano"] != "7000" {
		t.Fatalf("record=%v", rec.Fields)
	}
	e := nextEvent(t, files)
	var data map[string]any
	if err := json.Unmarshal(e.Data, &data); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"type": "add", "path": "b.mkv", "size": "700", "midhash256": m1, "timestamp": data["timestamp"]}
	if len(data) != len(want) || data["path"] != "b.mkv" || data["size"] != "700" || data["midhash256"] != m1 {
		t.Fatalf("file event data=%v", data)
	}
	if _, isString := data["timestamp"].(string); !isString {
		t.Fatalf("timestamp is not a string: %v", data["timestamp"])
	}

	// A second path with the same content: the lexicographically first wins.
	res = applyFiles(t, s, store.FileUpdate{Op: store.FileAdd, File: lf("/f/a.mkv", m1, 700)})
	if !res[0].Created {
		t.Fatal("second path not created")
	}
	rec = record(t, s, m1)
	if rec.Fields["filePath"] != "/f/a.mkv" || !slices.Equal(rec.Paths, []string{"/f/a.mkv", "/f/b.mkv"}) {
		t.Fatalf("filePath=%s paths=%v", rec.Fields["filePath"], rec.Paths)
	}
	if got, err := s.LocalFileForCID(ctx, m1); err != nil || got.Path != "/f/a.mkv" {
		t.Fatalf("local file=%+v %v", got, err)
	}

	// A signed sizeByte wins over the size on disk; its retraction gives
	// the disk's back.
	sg := storetest.Signer(1)
	submit(t, s, sg.Text(m1, "sizeByte", "123", 1))
	if v, _ := s.Field(ctx, m1, "sizeByte"); v != "123" {
		t.Fatalf("signed sizeByte=%s", v)
	}
	applyFiles(t, s, store.FileUpdate{Op: store.FileChange, File: lf("/f/a.mkv", m1, 800)})
	if v, _ := s.Field(ctx, m1, "sizeByte"); v != "123" {
		t.Fatalf("sizeByte after a change on disk=%s, want the signed 123", v)
	}
	submit(t, s, sg.Retraction(m1, "sizeByte", 2))
	if v, _ := s.Field(ctx, m1, "sizeByte"); v != "800" {
		t.Fatalf("sizeByte after retraction=%s, want 800", v)
	}

	// Content changes under a path: the path moves to the new record.
	res = applyFiles(t, s, store.FileUpdate{Op: store.FileChange, File: lf("/f/a.mkv", m2, 900)})
	if res[0].Created || record(t, s, m2).Fields["filePath"] != "/f/a.mkv" {
		t.Fatalf("change: %+v %v", res[0], record(t, s, m2).Fields)
	}
	if got := record(t, s, m1).Fields["filePath"]; got != "/f/b.mkv" {
		t.Fatalf("old record filePath=%s", got)
	}
	// Rename, then delete.
	applyFiles(t, s, store.FileUpdate{Op: store.FileRename, File: lf("/f/c.mkv", m1, 700), OldPath: "/f/b.mkv", EventPath: "c.mkv", EventOld: "b.mkv"})
	if got := record(t, s, m1).Fields["filePath"]; got != "/f/c.mkv" {
		t.Fatalf("after rename filePath=%s", got)
	}
	applyFiles(t, s, store.FileUpdate{Op: store.FileDelete, File: store.LocalFile{Path: "/f/c.mkv"}})
	rec = record(t, s, m1)
	for _, k := range []string{"filePath", "sizeByte", "mtimeNano"} {
		if _, ok := rec.Fields[k]; ok {
			t.Fatalf("%s still set after delete: %v", k, rec.Fields)
		}
	}
	locals, _ := s.LocalFiles(ctx)
	if len(locals) != 1 || locals[0].Path != "/f/a.mkv" || locals[0].CID != m2 {
		t.Fatalf("local files=%+v", locals)
	}
	tuples, total, err := s.FileTuples(ctx)
	if err != nil || len(tuples) != 1 || tuples[0].FilePath != "/f/a.mkv" || total != 900 || tuples[0].MtimeNano != 9000 {
		t.Fatalf("tuples=%+v total=%d %v", tuples, total, err)
	}
	st, _ := s.Stats(ctx)
	if st.Files.Count != 1 || st.Files.TotalSize != 900 {
		t.Fatalf("file stats=%+v", st.Files)
	}
	var types []string
	for range 5 {
		types = append(types, nextEvent(t, files).Type)
	}
	if want := []string{"add", "change", "change", "rename", "delete"}; !slices.Equal(types, want) {
		t.Fatalf("file events=%v, want %v", types, want)
	}
}

func TestFiles_Reset(t *testing.T) {
	s := open(t, store.Config{})
	addFiles(t, s, 0, 3)
	sub, _ := s.Subscribe(store.StreamFiles, "0")
	old := nextEvent(t, sub).ID
	sub.Close()
	m := storetest.MidhashCID(0)
	applyFiles(t, s, store.FileUpdate{Op: store.FileReset})
	if locals, _ := s.LocalFiles(ctx); len(locals) != 0 {
		t.Fatalf("local files after reset: %v", locals)
	}
	// Only the file described its record: gone with it (hidden.go).
	if r, err := s.Record(ctx, m, ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("record of a file-only cid after reset: %v %v, want ErrNotFound", r.Fields, err)
	}
	after, err := s.Subscribe(store.StreamFiles, old)
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if after.Gap == nil {
		t.Fatal("a cursor from before the reset gets no gap")
	}
	if e := nextEvent(t, after); e.Type != "reset" {
		t.Fatalf("first event after reset=%s", e.Type)
	}
}

func TestFiles_BadUpdates(t *testing.T) {
	s := open(t, store.Config{})
	for _, tc := range []struct {
		u    store.FileUpdate
		want error
	}{
		{store.FileUpdate{Op: "move", File: lf("/a", storetest.MidhashCID(1), 1)}, store.ErrBadPath},
		{store.FileUpdate{Op: store.FileAdd, File: lf("/a", "not-a-cid", 1)}, store.ErrBadCID},
		{store.FileUpdate{Op: store.FileAdd, File: lf("", storetest.MidhashCID(1), 1)}, store.ErrBadPath},
		{store.FileUpdate{Op: store.FileRename, File: lf("/a", storetest.MidhashCID(1), 1)}, store.ErrBadPath},
	} {
		if _, err := s.ApplyFiles(ctx, []store.FileUpdate{tc.u}); !errors.Is(err, tc.want) {
			t.Fatalf("%+v: %v, want %v", tc.u, err, tc.want)
		}
	}
	if _, err := s.LocalFileForCID(ctx, storetest.MidhashCID(5)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown local file: %v", err)
	}
	if st, _ := s.Stats(ctx); st.Records != 0 {
		t.Fatal("a refused update made a record")
	}
}

// A reset in the middle of one batch removes the file events written
// before it in that batch too (event rows are buffered until the batch
// ends or something deletes them).
func TestFiles_ResetMidBatch(t *testing.T) {
	tp, cp := paths(t)
	s := open(t, store.Config{TruthPath: tp, CachePath: cp})
	applyFiles(t, s,
		store.FileUpdate{Op: store.FileAdd, File: lf("/f/before.mkv", storetest.MidhashCID(1), 10)},
		store.FileUpdate{Op: store.FileReset},
		store.FileUpdate{Op: store.FileAdd, File: lf("/f/after.mkv", storetest.MidhashCID(2), 20)},
	)
	sub, err := s.Subscribe(store.StreamFiles, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []string
	for range 2 {
		e := nextEvent(t, sub)
		got = append(got, e.Type+" "+string(e.Data))
	}
	if !strings.HasPrefix(got[0], "reset ") || !strings.HasPrefix(got[1], "add ") || !strings.Contains(got[1], "after.mkv") {
		t.Fatalf("file stream after a mid-batch reset: %q", got)
	}
	if locals, _ := s.LocalFiles(ctx); len(locals) != 1 || locals[0].Path != "/f/after.mkv" {
		t.Fatalf("local files: %+v", locals)
	}
	// Replays start after the reset's horizon, so a leftover row would not
	// show there: count the stream's rows in the cache file.
	db, err := sql.Open("sqlite", "file:"+cp+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM kv WHERE k >= 'ev:file:events/' AND k < 'ev:file:events0'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("%d file event rows after a mid-batch reset, want 2 (reset, add)", n)
	}
}
