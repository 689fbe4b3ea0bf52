package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gocid "github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/store"
)

// startRedis runs a real redis-server on a free loopback port, its files
// in a temporary directory, until the test ends; it returns its URL and a
// client. The test is skipped, saying why, only where redis-server is not
// installed (.ci/run installs Debian's package).
func startRedis(t testing.TB) (string, *redis.Client) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skipf("redis-server is not installed (Debian package redis-server; .ci/run installs it): %v", err)
	}
	dir := t.TempDir()
	for attempt := 0; attempt < 5; attempt++ {
		port := freePort(t)
		cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no",
			"--logfile", filepath.Join(dir, "redis.log"))
		cmd.SysProcAttr = redisProcAttr()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		url := "redis://127.0.0.1:" + port + "/0"
		rdb := redisClient(t, url)
		if waitRedis(rdb, exited) {
			t.Cleanup(func() {
				rdb.Close()
				_ = cmd.Process.Kill()
				<-exited
			})
			return url, rdb
		}
		rdb.Close()
		_ = cmd.Process.Kill()
		<-exited // the port was taken meanwhile: another one
	}
	log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
	t.Fatalf("redis-server did not start:\n%s", log)
	return "", nil
}

// waitRedis polls PING until redis answers (true) or exits or 10 s pass.
func waitRedis(rdb *redis.Client, exited chan error) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			exited <- err
			return false
		default:
		}
		if rdb.Ping(context.Background()).Err() == nil {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func redisClient(t testing.TB, url string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return redis.NewClient(opt)
}

// fixRec is one record of the test library in the seeds' shapes: the
// fields the old core answered (flat string keys), its content ids, its
// multi-valued memberships and its box-local facts.
type fixRec struct {
	rid    string              // its rid in the layouts that have one
	mid    string              // its midhash256 cid: the hash layout's hashId
	sha    [32]byte            // its sha2-256 digest (cid_sha2-256, or a sha256:<hex> token)
	fields map[string]string   // what the old core answered
	sets   map[string][]string // multi-valued memberships: key-set members key/<m> = "true"
	local  map[string]string   // filePath, mtimeNano: the watcher's, never imported
}

func (r *fixRec) shaCID() string {
	m, _ := mh.Encode(r.sha[:], mh.SHA2_256)
	return gocid.NewCidV1(gocid.Raw, m).String()
}

func (r *fixRec) cids() []string { return []string{r.mid, r.shaCID()} }

// want is the record's metadata as the node answers it after the import:
// the old core's fields, each membership as key-set members, every cid.
func (r *fixRec) want() map[string]string {
	out := maps.Clone(r.fields)
	for k, ms := range r.sets {
		for _, m := range ms {
			out[k+"/"+m] = "true"
		}
	}
	for _, c := range r.cids() {
		out[store.LinkPrefix+c] = "true"
	}
	return out
}

// fixRID is a rid minted in 2024 (older than any the node mints now).
func fixRID(i int) string {
	b := [16]byte{0x01, 0x90, 0xb6, 0xf5, 0xe1, 0xa0, 0x7b, 0x3c, 0x8d, 0x2e, 0x4f, 0x5a, 0x6b, 0x7c, byte(i >> 8), byte(i)}
	return store.EncodeRID(b)
}

func fixMid(name string) string {
	d := sha256.Sum256([]byte("midhash " + name))
	return store.MidhashCID(d[:])
}

// seedLibrary is the library of the seeds' examples: seed 000's complete
// movie (FFmpeg streams, plugin fields), an anime episode (seed 000's
// video and anime metadata, subtitle references, an embedded cover) and a
// video of seed 003's catalogue (multi-valued category and tag
// memberships).
func seedLibrary() []*fixRec {
	movie := &fixRec{rid: fixRID(1), mid: fixMid("inception"), sha: sha256.Sum256([]byte("inception")),
		fields: map[string]string{
			"fileType": "video", "mimeType": "video/x-matroska", "sizeByte": "4294967296",
			"videoType": "movie", "originalTitle": "Inception", "movieYear": "2010", "title": "Inception",
			"titles/eng": "Inception", "titles/fra": "Inception", "titles/jpn": "インセプション",
			"fileinfo/duration": "8878.5", "fileinfo/formatName": "matroska,webm",
			"fileinfo/streamdetails/video/0/codec": "h264", "fileinfo/streamdetails/video/0/width": "1920",
			"fileinfo/streamdetails/video/0/height": "1080", "fileinfo/streamdetails/video/0/aspect": "16:9",
			"fileinfo/streamdetails/video/0/bitrate": "8000000",
			"fileinfo/streamdetails/audio/0/codec":   "dts", "fileinfo/streamdetails/audio/0/language": "eng",
			"fileinfo/streamdetails/audio/0/channels": "6",
			"fileinfo/streamdetails/audio/1/codec":    "ac3", "fileinfo/streamdetails/audio/1/language": "fra",
			"fileinfo/streamdetails/audio/1/channels":    "6",
			"fileinfo/streamdetails/subtitle/0/language": "eng", "fileinfo/streamdetails/subtitle/0/format": "subrip",
			"fileinfo/streamdetails/subtitle/1/language": "fra", "fileinfo/streamdetails/subtitle/1/format": "subrip",
			"tmdbid": "27205", "imdbid": "tt1375666",
			"plot/eng": "A thief who steals corporate secrets through dream-sharing technology...",
			"genre/0":  "Action", "genre/1": "Science Fiction", "genre/2": "Adventure",
			"rating": "8.4", "releasedate": "2010-07-16", "anime": "false",
			"art/poster":  "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku",
			"tmdb/poster": "/qmDpIHrmpJINaRKAfWQfftjCdyi.jpg", "jellyfin/cast/0/name": "Leonardo DiCaprio",
			"jellyfin/cast/0/role": "Cobb",
		},
		local: map[string]string{"filePath": "/files/watch/movies/Inception.2010.1080p.BluRay.x264.mkv", "mtimeNano": "1729872000000000000"},
	}
	anime := &fixRec{rid: fixRID(2), mid: fixMid("attack on titan 1x05"), sha: sha256.Sum256([]byte("aot")),
		fields: map[string]string{
			"fileType": "video", "videoType": "episode", "season": "1", "episode": "5", "anime": "true",
			"title": "Shingeki no Kyojin", "titles/jpn": "進撃の巨人", "titles/jpl": "Shingeki no Kyojin",
			"subtitles/eng/0":                      "bafkreie7q3iidccmpvszul7kudcvvuavuo7u6gzlbobczuk5nqk3b4akba",
			"fileinfo/streamdetails/video/0/codec": "hevc", "fileinfo/streamdetails/audio/0/language": "jpn",
			"fileinfo/streamdetails/subtitle/0/language": "eng", "fileinfo/streamdetails/subtitle/0/format": "ass",
			"fileinfo/streamdetails/embeddedimage/0/type": "cover",
			"anime-detector/confidence":                   "0.97",
		},
		local: map[string]string{"filePath": "/files/watch/anime/AoT.S01E05.mkv"},
	}
	video := &fixRec{rid: fixRID(3), mid: fixMid("catalogue video 17"), sha: sha256.Sum256([]byte("video 17")),
		fields: map[string]string{
			"title": "Night Market Street Food", "listStatus": "1", "videoType": "clip",
			"categoryIds/0": "cat-2", "categoryIds/1": "cat-7", "categoryIds/2": "cat-11",
			"tagIds/0": "tag-104", "tagIds/1": "tag-230", "tags/0": "street food", "tags/1": "taipei",
			"tagsFlat": "street food taipei", "provider/duration": "312",
		},
		sets:  map[string][]string{"genres": {"Documentary", "Travel"}},
		local: map[string]string{"filePath": "/files/catalogue/17.mp4"},
	}
	return []*fixRec{movie, anime, video}
}

// loadHash loads the library in seed 000's hash layout: one hash per file
// keyed by its midhash, cid_<alg> fields, file:__index__.
func loadHash(t testing.TB, rdb *redis.Client, lib []*fixRec) {
	t.Helper()
	ctx := context.Background()
	for _, r := range lib {
		h := maps.Clone(r.fields)
		maps.Copy(h, r.local)
		h["cid_midhash256"], h["cid_sha2-256"] = r.mid, r.shaCID()
		for k, ms := range r.sets {
			for _, m := range ms {
				h[k+"/"+m] = "true"
			}
		}
		if err := rdb.HSet(ctx, "file:"+r.mid, h).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.SAdd(ctx, redisIndexKey, r.mid).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// loadFlat loads the library in seed 001's flat layout: a string per
// field under the record's rid, the cid: index, the schema gate, the
// field index and duplicates sets. The first record uses the newer bare
// cid form (cid:<cid>, cids/<cid> members), the others the older tokens
// (cid:<alg>:<value>, a cids set, a sha256 hex digest); memberships are
// Redis sets.
func loadFlat(t testing.TB, rdb *redis.Client, lib []*fixRec) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(rdb.Set(ctx, redisSchemaKey, "2", 0).Err())
	for i, r := range lib {
		p := "file:" + r.rid + "/"
		kv := map[string]any{}
		for k, v := range r.fields {
			kv[p+k] = v
		}
		for k, v := range r.local {
			kv[p+k] = v
		}
		kv[p+canonicalKey] = store.CanonicalCID(r.cids())
		must(rdb.MSet(ctx, kv).Err())
		for k, ms := range r.sets {
			must(rdb.SAdd(ctx, p+k, toAnys(ms)...).Err())
		}
		if i == 0 {
			for _, c := range r.cids() {
				must(rdb.Set(ctx, "cid:"+c, r.rid, 0).Err())
				must(rdb.Set(ctx, p+store.LinkPrefix+c, "true", 0).Err())
			}
		} else {
			shaTok := "sha256:" + hex.EncodeToString(r.sha[:])
			must(rdb.Set(ctx, "cid:midhash256:"+r.mid, r.rid, 0).Err())
			must(rdb.Set(ctx, "cid:"+shaTok, r.rid, 0).Err())
			must(rdb.SAdd(ctx, p+"cids", "midhash256:"+r.mid, shaTok).Err())
		}
		must(rdb.SAdd(ctx, p+fieldIndexKey, "title").Err())
		must(rdb.SAdd(ctx, p+duplicatesKey, "/files/other/copy.mkv").Err())
		must(rdb.SAdd(ctx, redisIndexKey, r.rid).Err())
	}
	must(rdb.XAdd(ctx, &redis.XAddArgs{Stream: "meta:events", Values: map[string]any{"type": "set", "key": "x"}}).Err())
}

func toAnys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// sqliteFile makes a SQLite file at path with the statements given.
func sqliteFile(t testing.TB, path string, stmts []string, rows func(db *sql.DB) error) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if err := rows(db); err != nil {
		t.Fatal(err)
	}
}

// writeKV writes the library as a v1.x store: the flat keys in one kv
// table, with the derived rows, events, duplicate paths, user-data cells
// and scratch keys the layout also held. extra rows are added as given.
func writeKV(t testing.TB, path string, lib []*fixRec, extra map[string]any) {
	t.Helper()
	rows := map[string]any{"meta-core:schema-version": "2"}
	for _, r := range lib {
		p := "file:" + r.rid + "/"
		for k, v := range r.want() { // key-sets as members, cids as cids/<cid> members
			rows[p+k] = v
		}
		for k, v := range r.local {
			rows[p+k] = v
		}
		for _, c := range r.cids() {
			rows["cid:"+c] = r.rid
		}
		rows["idx:roots/"+r.rid] = "1"
		rows["dup:"+r.rid+"/files/other/copy.mkv"] = "1"
	}
	rows["idx:count/records"] = fmt.Sprint(len(lib))
	rows["ev:meta:events/1729872000000-0000000001"] = `{"type":"set"}`
	rows["btmagnet:abc"] = "magnet:?xt=urn:btih:abc"
	rows["udl:rec:zUser/bafkreiaaa/like"] = "x"
	maps.Copy(rows, extra)
	writeKVRows(t, path, rows, true)
}

// writeKVRows writes a kv table. sorted: rows go in in key order, as the
// old core's records arrived (time-ordered rids), else in map order.
func writeKVRows(t testing.TB, path string, rows map[string]any, sorted bool) {
	t.Helper()
	keys := slices.Collect(maps.Keys(rows))
	if sorted {
		slices.Sort(keys)
	}
	sqliteFile(t, path, []string{"CREATE TABLE kv(k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID"}, func(db *sql.DB) error {
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		for _, k := range keys {
			if _, err := tx.Exec("INSERT INTO kv(k, v) VALUES(?, ?)", k, rows[k]); err != nil {
				tx.Rollback()
				return err
			}
		}
		return tx.Commit()
	})
}

// v2Signers are the plugins whose keys signed a v2 truth's claims.
func v2Signers() (tmdb, ffmpeg *store.Signer) {
	return fixedSigner("tmdb"), fixedSigner("ffmpeg")
}

func fixedSigner(name string) *store.Signer {
	for i := 0; ; i++ {
		d := sha256.Sum256(fmt.Appendf(nil, "import test signer %s %d", name, i))
		if s, err := store.SignerFromHex(hex.EncodeToString(d[:])); err == nil {
			return s
		}
	}
}

// writeV2 writes the library as a v2 truth (seed 002): the ffmpeg
// plugin's claims on the midhash cid (fileinfo/…), the tmdb plugin's on
// the sha cid (the rest, and the link joining both), cid_group under the
// record's rid, schema-version 3. bad, when set, adds a claim whose
// signature is another claim's.
func writeV2(t testing.TB, path string, lib []*fixRec, bad bool) {
	t.Helper()
	tmdb, ffmpeg := v2Signers()
	const ts = 1_729_872_000_000
	var claims []store.Claim
	for _, r := range lib {
		for k, v := range r.want() {
			switch {
			case strings.HasPrefix(k, store.LinkPrefix):
			case strings.HasPrefix(k, "fileinfo/"):
				claims = append(claims, ffmpeg.Text(r.mid, k, v, ts))
			default:
				claims = append(claims, tmdb.Text(r.shaCID(), k, v, ts))
			}
		}
		claims = append(claims, tmdb.Text(r.shaCID(), store.LinkPrefix+r.mid, "true", ts))
	}
	if bad {
		c := tmdb.Text(lib[0].shaCID(), "forged", "yes", ts)
		c.Sig = claims[0].Sig
		claims = append(claims, c)
	}
	sqliteFile(t, path, []string{
		"CREATE TABLE principal(pid INTEGER PRIMARY KEY, uid TEXT NOT NULL UNIQUE)",
		"CREATE TABLE claim(cid TEXT NOT NULL, key TEXT NOT NULL, pid INTEGER NOT NULL, value ANY, ts INTEGER NOT NULL, sig BLOB NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY(cid, key, pid)) STRICT, WITHOUT ROWID",
		"CREATE TABLE cid_group(cid TEXT PRIMARY KEY, rid TEXT NOT NULL) WITHOUT ROWID",
		"CREATE TABLE meta(name TEXT PRIMARY KEY, value TEXT NOT NULL)",
		"INSERT INTO meta VALUES('schema-version', '3')",
	}, func(db *sql.DB) error {
		pids := map[string]int{}
		for i, s := range []*store.Signer{tmdb, ffmpeg} {
			pids[s.UID()] = i + 1
			if _, err := db.Exec("INSERT INTO principal VALUES(?, ?)", i+1, s.UID()); err != nil {
				return err
			}
		}
		for i, c := range claims {
			if _, err := db.Exec("INSERT INTO claim VALUES(?, ?, ?, ?, ?, ?, ?)", c.CID, c.Key, pids[c.UID], string(c.Value), int64(c.TS), c.Sig[:], i+1); err != nil {
				return err
			}
		}
		for _, r := range lib {
			for _, c := range r.cids() {
				if _, err := db.Exec("INSERT INTO cid_group VALUES(?, ?)", c, r.rid); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// importRun runs metanode import in process and returns its report.
func importRun(t *testing.T, env map[string]string, want int, args ...string) (*importReport, result) {
	t.Helper()
	r := runCLI(t, env, nil, append([]string{"import"}, args...)...)
	if r.code != want {
		t.Fatalf("metanode import %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
	}
	rep := &importReport{}
	if want == 0 {
		if err := json.Unmarshal([]byte(r.stdout), rep); err != nil {
			t.Fatalf("report: %v\n%s", err, r.stdout)
		}
	}
	return rep, r
}

// openImported opens a node on an imported data directory (loopback API,
// no swarm peers), closed when the test ends.
func openImported(t *testing.T, data string) *node.Node {
	t.Helper()
	n := node.New(node.Config{DataDir: data, HTTPAddr: "127.0.0.1:0", Listen: []string{"/ip4/127.0.0.1/tcp/0"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// getJSON decodes a 200 answer of GET base+path into v.
func getJSON(t *testing.T, base, path string, v any) {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, b)
	}
}

// search posts a search and returns the hits' rids.
func search(t *testing.T, base string, q map[string]any) []string {
	t.Helper()
	b, _ := json.Marshal(q)
	resp, err := http.Post(base+"/api/metadata/search", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Results []struct{ HashID string }
		Total   int
	}
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("search %s: %d %v %s", b, resp.StatusCode, err, body)
	}
	var rids []string
	for _, r := range out.Results {
		rids = append(rids, r.HashID)
	}
	return rids
}

// checkLibrary reads every record of lib back through /meta/{h} (by rid
// and by each cid), /api/meta/{cid} and search, and wants exactly what the
// old core answered (its fields; memberships as key-set members; every
// cid). keepRIDs: the layout had rids, which the records keep.
func checkLibrary(t *testing.T, base string, lib []*fixRec, keepRIDs bool) {
	t.Helper()
	for _, r := range lib {
		want := r.want()
		var meta struct {
			HashID   string            `json:"hashId"`
			Metadata map[string]string `json:"metadata"`
		}
		getJSON(t, base, "/meta/"+r.mid, &meta)
		if keepRIDs && meta.HashID != r.rid {
			t.Errorf("%s: rid %s, want the layout's %s", r.mid, meta.HashID, r.rid)
		}
		if !maps.Equal(meta.Metadata, want) {
			t.Errorf("GET /meta/%s:\n got %v\nwant %v", r.mid, meta.Metadata, want)
		}
		rid := meta.HashID
		getJSON(t, base, "/meta/"+rid, &meta)
		if !maps.Equal(meta.Metadata, want) {
			t.Errorf("GET /meta/%s (rid): %v", rid, meta.Metadata)
		}
		var doc struct {
			Metadata map[string]string `json:"metadata"`
			CIDs     []string          `json:"cids"`
			Canon    string            `json:"canonical_cid"`
		}
		getJSON(t, base, "/api/meta/"+r.shaCID(), &doc)
		slices.Sort(doc.CIDs)
		wantCIDs := slices.Sorted(slices.Values(r.cids()))
		if !maps.Equal(doc.Metadata, want) || !slices.Equal(doc.CIDs, wantCIDs) || doc.Canon != store.CanonicalCID(wantCIDs) {
			t.Errorf("GET /api/meta/%s: %+v", r.shaCID(), doc)
		}
		if got := search(t, base, map[string]any{"query": r.fields["title"]}); !slices.Contains(got, rid) {
			t.Errorf("search %q: %v, want %s among them", r.fields["title"], got, rid)
		}
		// Filters: a key-set membership, a flat value's substring.
		for k, ms := range r.sets {
			q := map[string]any{"filters": []any{map[string]any{"property": k, "values": ms[:1]}}}
			if got := search(t, base, q); !slices.Contains(got, rid) {
				t.Errorf("search %v: %v, want %s among them", q, got, rid)
			}
		}
		if v, ok := r.fields["tagsFlat"]; ok {
			q := map[string]any{"filters": []any{map[string]any{"property": "tagsFlat", "values": []string{strings.Fields(v)[1]}}}}
			if got := search(t, base, q); !slices.Equal(got, []string{rid}) {
				t.Errorf("search %v: %v, want %s alone", q, got, rid)
			}
		}
	}
}

func redisZ(member string, score float64) redis.Z { return redis.Z{Score: score, Member: member} }

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// catalogueFields are the fields of video i of a catalogue in seed 003's
// shape (multi-valued category and tag memberships, provider fields,
// stream details), n of them.
func catalogueFields(i, n int) map[string]string {
	f := map[string]string{
		"title":         fmt.Sprintf("Catalogue video %d", i),
		"listStatus":    "1",
		"categoryIds/0": fmt.Sprint("cat-", i%2000),
		"categoryIds/1": fmt.Sprint("cat-", (i*7)%2000),
		"tagIds/0":      fmt.Sprint("tag-", i%10000),
		"tags/0":        fmt.Sprint("tag name ", i%10000),
		"tagsFlat":      fmt.Sprintf("tag name %d", i%10000),
	}
	for k := len(f); k < n; k++ {
		f[fmt.Sprintf("provider/field%02d", k)] = fmt.Sprintf("value %d of video %d", k, i)
	}
	for len(f) > n {
		for k := range f {
			if k != "title" {
				delete(f, k)
				break
			}
		}
	}
	return f
}

// loadBigFlat loads a catalogue of records × fields in the flat layout:
// each record under its rid, with two cids in the bare form (cid:<cid>,
// cids/<cid> members).
func loadBigFlat(t testing.TB, rdb *redis.Client, records, fields int) {
	t.Helper()
	ctx := context.Background()
	pipe := rdb.Pipeline()
	flush := func() {
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pipe.Set(ctx, redisSchemaKey, "2", 0)
	for i := range records {
		r := &fixRec{rid: fixRID(1000 + i), mid: fixMid(fmt.Sprint("catalogue ", i)), sha: sha256.Sum256(fmt.Append(nil, "catalogue ", i))}
		p := "file:" + r.rid + "/"
		kv := make([]any, 0, 2*fields+8)
		for k, v := range catalogueFields(i, fields) {
			kv = append(kv, p+k, v)
		}
		for _, c := range r.cids() {
			kv = append(kv, p+store.LinkPrefix+c, "true", "cid:"+c, r.rid)
		}
		pipe.MSet(ctx, kv...)
		pipe.SAdd(ctx, redisIndexKey, r.rid)
		if i%500 == 499 {
			flush()
		}
	}
	flush()
}

// loadBigHash loads the same catalogue in the hash layout: a hash per
// record keyed by its midhash, with cid_midhash256 and cid_sha2-256.
func loadBigHash(t testing.TB, rdb *redis.Client, records, fields int) {
	t.Helper()
	ctx := context.Background()
	pipe := rdb.Pipeline()
	for i := range records {
		r := &fixRec{mid: fixMid(fmt.Sprint("catalogue ", i)), sha: sha256.Sum256(fmt.Append(nil, "catalogue ", i))}
		h := catalogueFields(i, fields)
		h["cid_midhash256"], h["cid_sha2-256"] = r.mid, r.shaCID()
		pipe.HSet(ctx, "file:"+r.mid, h)
		pipe.SAdd(ctx, redisIndexKey, r.mid)
		if i%500 == 499 || i == records-1 {
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}
