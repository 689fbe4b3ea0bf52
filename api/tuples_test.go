package api_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/store"
)

// GET /api/files/tuples is this box's file list (meta-sort compares it
// with the disk): one tuple per local file, with the size and mtime on
// disk, whatever signers claim, and count/totalSize as /api/stats files.
// Before, it listed one tuple per record with the merged sizeByte: a record
// holding two files showed one, and a signed sizeByte changed the sizes.
func TestFileTuples_LocalFiles(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.root, "plugin/a.txt"), "hello world content\n")
	writeFile(t, filepath.Join(e.root, "plugin/copy-of-a.txt"), "hello world content\n")
	writeFile(t, filepath.Join(e.root, "plugin/big.bin"), strings.Repeat("x", 100_000))
	writeFile(t, filepath.Join(e.root, "plugin/alone.txt"), "alone")
	regs := map[string]api.RegisterResult{}
	for _, p := range []string{"plugin/a.txt", "plugin/copy-of-a.txt", "plugin/big.bin", "plugin/alone.txt"} {
		r, err := e.c.RegisterFile(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		regs[p] = r
	}
	a, big := regs["plugin/a.txt"].CID, regs["plugin/big.bin"].CID
	// A link puts big.bin in a.txt's record; a signed sizeByte claims 1.
	if res := e.post(
		e.text(a, "cids/"+big, "true", e.ts(0)),
		e.text(a, "sizeByte", "1", e.ts(0)),
	); res.Accepted != 2 {
		t.Fatalf("claims: %+v", res)
	}
	rec, err := e.c.Meta(t.Context(), a, api.MetaOptions{})
	if err != nil || rec.Metadata["sizeByte"] != "1" {
		t.Fatalf("the merged view keeps the signed sizeByte: %+v %v", rec.Metadata, err)
	}

	var tu api.FileTuplesResponse
	e.get("/api/files/tuples").decode(t, &tu)
	if tu.Files == nil {
		t.Fatal("no files")
	}
	byPath := map[string]api.FileTuple{}
	for _, f := range *tu.Files {
		byPath[f.FilePath] = f
	}
	if tu.Count != 4 || len(byPath) != 4 {
		t.Fatalf("tuples: want the 4 local files, got %+v", tu)
	}
	var total int64
	for p, r := range regs {
		f, ok := byPath[filepath.Join(e.root, r.Path)]
		fi, err := os.Stat(filepath.Join(e.root, r.Path))
		if err != nil {
			t.Fatal(err)
		}
		if !ok || f.SizeByte != fi.Size() || f.MtimeNano != fi.ModTime().UnixNano() {
			t.Errorf("%s: tuple %+v, disk size %d mtime %d", p, f, fi.Size(), fi.ModTime().UnixNano())
		}
		total += fi.Size()
	}
	abs := func(rel string) string { return filepath.Join(e.root, regs[rel].Path) }
	if byPath[abs("plugin/a.txt")].HashID != rec.RID || byPath[abs("plugin/copy-of-a.txt")].HashID != rec.RID ||
		byPath[abs("plugin/big.bin")].HashID != rec.RID || byPath[abs("plugin/alone.txt")].HashID != regs["plugin/alone.txt"].Root {
		t.Errorf("hashIds: %+v (record of a.txt %s)", byPath, rec.RID)
	}
	if tu.TotalSize != total {
		t.Errorf("totalSize %d, want %d", tu.TotalSize, total)
	}

	// The same figures as /api/stats and /api/file/{cid}/info.
	var st store.Stats
	e.get("/api/stats").decode(t, &st)
	if st.Files.Count != int64(tu.Count) || st.Files.TotalSize != tu.TotalSize {
		t.Errorf("stats files %+v, tuples count %d totalSize %d", st.Files, tu.Count, tu.TotalSize)
	}
	var info api.FileInfo
	e.get("/api/file/"+a+"/info").decode(t, &info)
	if info.Size == nil || *info.Size != byPath[info.FilePath].SizeByte {
		t.Errorf("info %+v disagrees with the tuple %+v", info, byPath[info.FilePath])
	}
	var sum api.FileTuplesResponse
	e.get("/api/files/tuples?summary=1").decode(t, &sum)
	if sum.Files != nil || sum.Count != tu.Count || sum.TotalSize != tu.TotalSize {
		t.Errorf("summary %+v", sum)
	}
}

// An empty library lists files as [] (never null or absent).
func TestFileTuples_Empty(t *testing.T) {
	e := newEnv(t)
	a := e.get("/api/files/tuples")
	if a.status != 200 || strings.TrimSpace(string(a.body)) != `{"files":[],"count":0,"totalSize":0}` {
		t.Errorf("empty: %d %s", a.status, a.body)
	}
}
