package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/store"
)

// wantTally fails unless the report notes reason count times, an example
// containing each of names.
func wantTally(t *testing.T, what string, ts tallies, reason string, count int64, names ...string) {
	t.Helper()
	e := ts[reason]
	if e == nil || e.Count != count {
		t.Errorf("%s %s: %+v, want %d", what, reason, e, count)
		return
	}
	for _, n := range names {
		if !slices.ContainsFunc(e.Examples, func(ex string) bool { return strings.Contains(ex, n) }) {
			t.Errorf("%s %s: %v does not name %s", what, reason, e.Examples, n)
		}
	}
}

// TestImport_RedisHash: seed 000's hash layout with bad input among it,
// detected, first as a dry run (which changes nothing), then into a
// stopped node's data directory: every record reads back as the old core
// answered, and each bad input is counted and named while the rest is
// imported; running it again adds nothing.
func TestImport_RedisHash(t *testing.T) {
	t.Parallel()
	url, rdb := startRedis(t)
	ctx := context.Background()
	lib := seedLibrary()
	loadHash(t, rdb, lib)
	shared := fixMid("shared sha1") // two records' cid_sha1
	badRows := map[string]map[string]any{
		"file:" + fixMid("a"): {"title": "A", "cid_sha1": shared, "notes": string([]byte{0xff, 0xfe}), "a//b": "x", "big": strings.Repeat("x", 70_000)},
		"file:" + fixMid("b"): {"title": "B", "cid_sha1": shared},
		"file:legacy-id-7":    {"title": "no content id"},
		// Seed 000's midhash collision: a second file with the same
		// midhash is keyed by its sha, and lists the midhash too.
		"file:" + fixMid("collision"): {"title": "Collision", "cid_midhash256": lib[0].mid},
	}
	for k, v := range badRows {
		if err := rdb.HSet(ctx, k, v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Set(ctx, "file:"+fixMid("string"), "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "app:video:detail:7", `{"id":"7","categoryIds":["cat-2","cat-7"]}`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	env := map[string]string{"HOME": t.TempDir()}

	dry, _ := importRun(t, env, 0, "--from-redis", url, "--data", data, "--dry-run")
	if !dry.DryRun || dry.Layout != layoutHash || dry.Records != 7 || dry.Fields == 0 || dry.Stored != (outcomes{}) {
		t.Fatalf("dry run: %+v", dry)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("a dry run made the data directory: %v", err)
	}
	rep, _ := importRun(t, env, 0, "--from-redis", url, "--data", data)
	if !rep.Complete || rep.Records != 7 || rep.Stored.Rejected != 0 || rep.Fields != dry.Fields || rep.Links != dry.Links {
		t.Fatalf("report: %+v (dry run %+v)", rep, dry)
	}
	wantTally(t, "bad input", rep.BadInput, badNotAHash, 1, fixMid("string"))
	wantTally(t, "bad input", rep.BadInput, badNoLayout, 1, "app:video:detail:7")
	wantTally(t, "bad input", rep.BadInput, badNotUTF8, 1, "notes")
	wantTally(t, "bad input", rep.BadInput, badAliasConflict, 2, shared, lib[0].mid)
	wantTally(t, "not carried", rep.NotCarry, ncNoContentID, 1, "legacy-id-7")
	wantTally(t, "not carried", rep.NotCarry, ncBadKey, 1, "a//b")
	wantTally(t, "not carried", rep.NotCarry, ncTooLarge, 1, "big")
	wantTally(t, "not carried", rep.NotCarry, ncBoxLocal, 4, "filePath", "mtimeNano")

	again, _ := importRun(t, env, 0, "--from-redis", url, "--data", data)
	if again.Stored.Accepted != 0 || again.Stored.Stale != 0 || again.Stored.Unchanged != rep.Stored.Accepted || again.SessionTS != rep.SessionTS {
		t.Fatalf("a second run: %+v, want every claim unchanged (first: %+v)", again.Stored, rep.Stored)
	}
	// The old core wrote since: --fresh signs a newer session, whose
	// changed value replaces the imported one.
	lib[0].fields["title"] = "Inception (2010)"
	if err := rdb.HSet(ctx, "file:"+lib[0].mid, "title", lib[0].fields["title"]).Err(); err != nil {
		t.Fatal(err)
	}
	fresh, _ := importRun(t, env, 0, "--from-redis", url, "--data", data, "--fresh")
	if fresh.SessionTS <= rep.SessionTS || fresh.Stored.Accepted != 1 || fresh.Stored.Rejected != 0 {
		t.Fatalf("--fresh: session %d after %d, %+v: want one value changed", fresh.SessionTS, rep.SessionTS, fresh.Stored)
	}
	n := openImported(t, data)
	base := n.APIURL()
	checkLibrary(t, base, lib, false)
	// The rest of a record with bad input is imported; the id two records
	// claim links neither.
	var a struct{ Metadata map[string]string }
	getJSON(t, base, "/meta/"+fixMid("a"), &a)
	if a.Metadata["title"] != "A" || len(a.Metadata) != 2 {
		t.Fatalf("record a: %v, want its title and its own cid", a.Metadata)
	}
	if resp, err := http.Get(base + "/api/meta/" + shared); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the shared id: %v %v, want 404", resp, err)
	} else {
		resp.Body.Close()
	}
}

// TestImport_RedisFlat: seed 001's flat layout (both its cid forms, Redis
// sets for memberships, the schema gate, derived and box-local keys, an
// event stream) with bad input: the records keep their rids and read back
// as the old core answered; memberships become key-set members.
func TestImport_RedisFlat(t *testing.T) {
	t.Parallel()
	url, rdb := startRedis(t)
	ctx := context.Background()
	lib := seedLibrary()
	loadFlat(t, rdb, lib)
	// Another record lists the first one's sha cid: the cid: index says
	// whose it is.
	other := fixRID(9)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(rdb.Set(ctx, "file:"+other+"/title", "Other", 0).Err())
	must(rdb.Set(ctx, "file:"+other+"/cids/"+fixMid("other"), "true", 0).Err())
	must(rdb.Set(ctx, "file:"+other+"/cids/"+lib[0].shaCID(), "true", 0).Err())
	must(rdb.ZAdd(ctx, "file:"+other+"/ranking", redisZ("x", 1)).Err())
	must(rdb.Set(ctx, "file:"+fixRID(10)+"/cids", "not a set", 0).Err())
	must(rdb.Set(ctx, "file:"+fixRID(10)+"/title", "No cids", 0).Err())
	must(rdb.Set(ctx, "file:stray", "x", 0).Err())
	must(rdb.Set(ctx, "cid:"+fixMid("deleted"), fixRID(11), 0).Err()) // left by a deleted record
	must(rdb.Set(ctx, "file:"+other+"/notes", string([]byte{'a', 0xff}), 0).Err())

	data := filepath.Join(t.TempDir(), "data")
	rep, _ := importRun(t, map[string]string{"HOME": t.TempDir()}, 0, "--from-redis", url, "--data", data)
	if rep.Layout != layoutFlat || !rep.Complete || rep.Records != 5 || rep.RIDsNamed != 4 || rep.Stored.Rejected != 0 {
		t.Fatalf("report: %+v", rep)
	}
	wantTally(t, "bad input", rep.BadInput, badAliasConflict, 1, lib[0].shaCID())
	wantTally(t, "bad input", rep.BadInput, badWrongType, 1, fixRID(10)+"/cids")
	wantTally(t, "bad input", rep.BadInput, badNoLayout, 1, "file:stray")
	wantTally(t, "bad input", rep.BadInput, badNotUTF8, 1, "notes")
	wantTally(t, "not carried", rep.NotCarry, ncType, 1, "ranking")
	wantTally(t, "not carried", rep.NotCarry, ncNoContentID, 1, fixRID(10))
	wantTally(t, "skipped", rep.Skipped, skipSchema, 1)
	wantTally(t, "skipped", rep.Skipped, skipDangling, 1, fixRID(11))
	wantTally(t, "skipped", rep.Skipped, skipEvents, 1, "meta:events")
	n := openImported(t, data)
	checkLibrary(t, n.APIURL(), lib, true)
	var o struct {
		HashID   string
		Metadata map[string]string
	}
	getJSON(t, n.APIURL(), "/meta/"+fixMid("other"), &o)
	if o.HashID != other || o.Metadata["title"] != "Other" || o.Metadata["cids/"+lib[0].shaCID()] != "" {
		t.Fatalf("the other record: %+v", o)
	}
}

// TestImport_SQLiteKV: a v1.x kv table, with the rows it held besides
// records and some bad input: records keep their rids and read back.
func TestImport_SQLiteKV(t *testing.T) {
	t.Parallel()
	lib := seedLibrary()
	dir := t.TempDir()
	src := filepath.Join(dir, "meta-core.db")
	odd := fixRID(7)
	writeKV(t, src, lib, map[string]any{
		"file:" + odd + "/title":                   []byte{0xc3, 0x28}, // not UTF-8
		"file:" + odd + "/year":                    "1999",
		"file:" + odd + "/cids/" + fixMid("odd"):   "true",
		"file:" + odd + "/cids/" + lib[2].shaCID(): "true", // the index names lib[2]
		"file:nolayout":                            "x",
		"file:" + odd + "/cid_md5":                 "not-a-digest",
	})
	data := filepath.Join(dir, "data")
	rep, _ := importRun(t, map[string]string{"HOME": t.TempDir()}, 0, "--from-sqlite", src, "--data", data)
	if rep.Layout != layoutKV || !rep.Complete || rep.Records != 4 || rep.RIDsNamed != 4 || rep.Stored.Rejected != 0 {
		t.Fatalf("report: %+v", rep)
	}
	wantTally(t, "bad input", rep.BadInput, badNotUTF8, 1, odd)
	wantTally(t, "bad input", rep.BadInput, badNoLayout, 1, "file:nolayout")
	wantTally(t, "bad input", rep.BadInput, badAliasConflict, 1, lib[2].shaCID())
	wantTally(t, "not carried", rep.NotCarry, ncBadAlias, 1, "cid_md5")
	wantTally(t, "not carried", rep.NotCarry, ncUDL, 1)
	wantTally(t, "skipped", rep.Skipped, skipScratch, 1, "btmagnet:abc")
	n := openImported(t, data)
	checkLibrary(t, n.APIURL(), lib, true)
	var o struct {
		HashID   string
		Metadata map[string]string
	}
	getJSON(t, n.APIURL(), "/meta/"+odd, &o)
	if o.Metadata["year"] != "1999" || o.Metadata["title"] != "" {
		t.Fatalf("the record with a bad value: %+v", o)
	}
}

// TestImport_SQLiteV2: a v2 truth's claims are imported as they are:
// verified (a forged one is rejected and named), their signers kept and
// trusted as local writers, the records under their rids.
func TestImport_SQLiteV2(t *testing.T) {
	t.Parallel()
	lib := seedLibrary()
	dir := t.TempDir()
	src := filepath.Join(dir, "meta-core.db")
	writeV2(t, src, lib, true)
	data := filepath.Join(dir, "data")
	rep, _ := importRun(t, map[string]string{"HOME": t.TempDir()}, 0, "--from-sqlite", src, "--data", data)
	tmdb, ffmpeg := v2Signers()
	if rep.Layout != layoutClaims || !rep.Complete || rep.Records != 3 || rep.Fields != 0 || rep.Stored.Rejected != 1 {
		t.Fatalf("report: %+v", rep)
	}
	if slices.Sort(rep.Signers); !slices.Equal(rep.Signers, slices.Sorted(slices.Values([]string{tmdb.UID(), ffmpeg.UID()}))) {
		t.Fatalf("signers %v", rep.Signers)
	}
	wantTally(t, "rejected", rep.Rejected, "bad_signature", 1, "forged")
	n := openImported(t, data)
	checkLibrary(t, n.APIURL(), lib, true)
	for _, s := range []*store.Signer{tmdb, ffmpeg} {
		if !n.Store().Trusted(s.UID()) {
			t.Errorf("signer %s is not trusted after the import", s.UID())
		}
	}
	// Idempotent: the claims are the same claims.
	again, _ := importRun(t, map[string]string{"HOME": t.TempDir()}, 0, "--from-sqlite", src, "--data", data, "--api", n.APIURL())
	if again.Stored.Accepted != 0 || again.Stored.Unchanged != rep.Stored.Accepted {
		t.Fatalf("again through the API: %+v", again.Stored)
	}
}

// TestImport_SQLiteCutShort: a SQLite file cut short is counted and named
// as damaged, and the rows its remaining pages hold are imported: a v1.x
// kv table written in key order (SQLite itself reads it up to the cut) or
// in any order (the lost pages include interior ones, under which SQLite
// reaches nothing: the import reads the leaf pages itself), and a v2 truth.
func TestImport_SQLiteCutShort(t *testing.T) {
	t.Parallel()
	var lib []*fixRec
	for i := range 60 {
		r := &fixRec{rid: fixRID(100 + i), mid: fixMid(fmt.Sprint("t", i)), sha: sha256.Sum256(fmt.Append(nil, i)), fields: map[string]string{}}
		for k := range 4 {
			r.fields[fmt.Sprintf("field%d", k)] = strings.Repeat(fmt.Sprint(i, k), 100)
		}
		r.fields["title"] = fmt.Sprint("Title ", i)
		lib = append(lib, r)
	}
	kvRows := map[string]any{"meta-core:schema-version": "2"}
	for _, r := range lib {
		for k, v := range r.want() {
			kvRows["file:"+r.rid+"/"+k] = v
		}
	}
	for _, tc := range []struct {
		name  string
		write func(path string)
	}{
		{"kv in key order", func(p string) { writeKVRows(t, p, kvRows, true) }},
		{"kv in any order", func(p string) { writeKVRows(t, p, kvRows, false) }},
		{"v2 truth", func(p string) { writeV2(t, p, lib, false) }},
	} {
		dir := t.TempDir()
		src := filepath.Join(dir, "meta-core.db")
		tc.write(src)
		fi, err := os.Stat(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(src, fi.Size()*6/10); err != nil {
			t.Fatal(err)
		}
		data := filepath.Join(dir, "data")
		rep, _ := importRun(t, map[string]string{"HOME": t.TempDir()}, 0, "--from-sqlite", src, "--data", data)
		if !rep.Complete || rep.Stored.Accepted < int64(len(lib)) || rep.Stored.Accepted >= int64(len(lib)*7) || rep.Stored.Rejected != 0 {
			t.Fatalf("%s: resumed %v, %+v", tc.name, rep.Resumed, rep.Stored)
		}
		wantTally(t, tc.name, rep.BadInput, badDamaged, 1, "cut short")
		if tc.name != "kv in any order" {
			continue
		}
		n := openImported(t, data)
		found := 0
		for _, r := range lib {
			var got struct{ Metadata map[string]string }
			resp, err := http.Get(n.APIURL() + "/meta/" + r.rid)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode == http.StatusOK {
				json.NewDecoder(resp.Body).Decode(&got)
				for k, v := range got.Metadata {
					if want, ok := r.want()[k]; !ok || want != v {
						t.Fatalf("%s %s = %q, want %q", r.rid, k, v, want)
					}
				}
				found++
			}
			resp.Body.Close()
		}
		if found == 0 || found == len(lib) {
			t.Fatalf("%d of %d records read back from the part the file kept", found, len(lib))
		}
	}
}

// TestImport_ThroughAPIToSwarm: into a running node through its API, the
// claims are shared with the swarm as they land: a paired home that
// trusts this node gets the imported records (this node vouches for its
// import key).
func TestImport_ThroughAPIToSwarm(t *testing.T) {
	t.Parallel()
	url, rdb := startRedis(t)
	lib := seedLibrary()
	loadFlat(t, rdb, lib)
	dir := t.TempDir()
	a := openImported(t, filepath.Join(dir, "a"))
	b := node.New(node.Config{DataDir: filepath.Join(dir, "b"), HTTPAddr: "127.0.0.1:0", Listen: []string{"/ip4/127.0.0.1/tcp/0"},
		Bootstrap: a.Addrs(), Logger: discardLogger()})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := b.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Trust(ctx, a.UID()); err != nil {
		t.Fatal(err)
	}
	rep, _ := importRun(t, map[string]string{"HOME": t.TempDir()}, 0, "--from-redis", url, "--data", filepath.Join(dir, "a"), "--api", a.APIURL())
	if !strings.Contains(rep.Into, a.APIURL()) || rep.Stored.Accepted == 0 || rep.Stored.Rejected != 0 {
		t.Fatalf("report: %+v", rep)
	}
	checkLibrary(t, a.APIURL(), lib, true)
	for _, r := range lib {
		want := r.want()
		deadline := time.Now().Add(90 * time.Second)
		for {
			rec, err := b.Store().Record(ctx, r.mid, "")
			if err == nil && len(rec.Fields) == len(want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("home b has %s as %v (%v) after 90 s, want %d fields", r.mid, rec.Fields, err, len(want))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// TestImport_ResumesAfterKill: an import killed (SIGKILL) midway and run
// again goes on from where it stopped and ends with every claim once.
func TestImport_ResumesAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	url, rdb := startRedis(t)
	const records, fields = 1500, 8
	loadBigFlat(t, rdb, records, fields)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	args := []string{"import", "--from-redis", url, "--data", data, "--batch", "300"}
	cmd := exec.Command(buildBinary(t), args...)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.HasPrefix(readState(data), flatCursor) { // some records stored, most not
		select {
		case err := <-done:
			t.Fatalf("the import ended (%v) before it could be killed midway", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no progress recorded in 2 minutes")
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-done
	var rep importReport
	if err := json.Unmarshal([]byte(binCLI(t, nil, 0, args...)), &rep); err != nil {
		t.Fatal(err)
	}
	total := int64(records*fields + records) // fields, and one link per record
	if !rep.Resumed || rep.Stored.Rejected != 0 || rep.Stored.Accepted+rep.Stored.Unchanged >= total || rep.Stored.Unchanged > 1000 {
		t.Fatalf("the second run: resumed %v, %+v, want it to go on from the cursor", rep.Resumed, rep.Stored)
	}
	n := openImported(t, data)
	st, err := n.Store().Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Claims != total+1 || st.Records != records { // and the node's vouch for the import key
		t.Fatalf("after the rerun: %d claims and %d records, want %d and %d", st.Claims, st.Records, total+1, records)
	}
}

// readState returns the cursor of the one source in an import state file.
func readState(data string) string {
	b, err := os.ReadFile(filepath.Join(data, importStateFile))
	if err != nil {
		return ""
	}
	var st importState
	if json.Unmarshal(b, &st) != nil {
		return ""
	}
	for _, r := range st.Sources {
		return r.Cursor
	}
	return ""
}
