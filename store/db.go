package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"

	_ "modernc.org/sqlite" // registers the "sqlite" driver (pure Go)
)

// truthVersion is the truth schema this build reads and writes
// (meta schema-version). cacheVersion is the cache layout and merge
// rules; a cache with another version is thrown away and rebuilt, since it
// is derived (4: two buckets whose oldest votes share a ts tie on time).
const (
	truthVersion = "3"
	cacheVersion = "metanode-cache-4"
)

// mergeRules names the rules the cache's merged values follow (meta
// cache row merge_rules). A cache merged under other rules (or before the
// row existed) is rebuilt in place at boot: unlike a new layout, that
// keeps its local files, scratch keys and file stream.
// homes: each home counts once per field (docs/store.md, Merge).
const mergeRules = "homes"

// cachePageSize is the cache's page size (the truth file keeps SQLite's
// default): measured on the reference dataset, 8 KiB pages cost the writer
// about a tenth less CPU per claim than 4 KiB (16 KiB was no better).
// Truth keeps 4 KiB: 8 KiB pages for truth measured no better (writer CPU
// per claim over 500,000 claims 68.6 µs with 4 KiB, 70.9 µs with 8 KiB).
const cachePageSize = 8192

// dbKind selects the pragmas of one connection pool.
type dbKind int

const (
	truthWriter dbKind = iota // synchronous=FULL: an answer means durable
	cacheWriter               // synchronous=NORMAL: the cache is rebuilt from truth if lost
	readPool                  // query_only
)

// dsn is the one place that builds connection strings: every pragma the
// store depends on is here. The path is escaped into a file: URI so that
// '?' and '#' in a directory name cannot be read as URI syntax.
func dsn(path string, kind dbKind) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(wal)")
	q.Add("_pragma", "foreign_keys(off)")
	q.Add("_pragma", "temp_store(memory)")
	// Page caches: the process pays about twice the configured size. The
	// C allocator (modernc.org/memory) hands out power-of-two slots and a
	// cached page is a page plus ~300 bytes, so a 4 KiB page takes an
	// 8 KiB slot (a 8 KiB page, 16 KiB of which 12 are touched). So the
	// caches are kept modest: the truth writer's and the readers' were
	// halved (from 8 MiB and 2 MiB) for 13 MB less RSS at a million
	// claims, at no measurable cost to ingest or reads; bigger ones
	// bought the writer only a few percent of CPU per claim.
	switch kind {
	case truthWriter:
		q.Add("_pragma", "synchronous(full)")
		q.Add("_pragma", "cache_size(-4096)") // KiB
		q.Add("_pragma", "wal_autocheckpoint(16000)")
	case cacheWriter:
		q.Add("_pragma", "synchronous(normal)")
		q.Add("_pragma", "cache_size(-16384)")
		q.Add("_pragma", "wal_autocheckpoint(16000)")
	case readPool:
		q.Add("_pragma", "cache_size(-1024)")
		q.Add("_pragma", "query_only(1)")
	}
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	return u.String()
}

// openDB opens a pool on path. Writers get exactly one connection.
func openDB(path string, kind dbKind, readConns int) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn(path, kind))
	if err != nil {
		return nil, err
	}
	if kind == readPool {
		db.SetMaxOpenConns(readConns)
		db.SetMaxIdleConns(readConns)
	} else {
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
	}
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return db, nil
}

const truthDDL = `
CREATE TABLE IF NOT EXISTS principal(
	pid INTEGER PRIMARY KEY,
	uid TEXT NOT NULL UNIQUE
) STRICT;
CREATE TABLE IF NOT EXISTS claim(
	cid   TEXT NOT NULL,
	key   TEXT NOT NULL,
	pid   INTEGER NOT NULL,
	value ANY,
	ts    INTEGER NOT NULL,
	sig   BLOB NOT NULL,
	id    BLOB NOT NULL,
	seq   INTEGER NOT NULL,
	PRIMARY KEY(cid, key, pid)
) STRICT, WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS claim_ts_id ON claim(ts, id);
CREATE TABLE IF NOT EXISTS cid_group(
	cid TEXT PRIMARY KEY,
	rid TEXT NOT NULL
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS group_edge(
	cid   TEXT NOT NULL,
	other TEXT NOT NULL,
	pid   INTEGER NOT NULL,
	PRIMARY KEY(cid, other, pid)
) STRICT, WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS group_edge_pid ON group_edge(pid);
CREATE TABLE IF NOT EXISTS meta(
	name  TEXT PRIMARY KEY,
	value TEXT NOT NULL
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS trust(
	uid   TEXT PRIMARY KEY,
	state TEXT NOT NULL,
	note  TEXT NOT NULL DEFAULT '',
	added INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
-- Claim rows found damaged, set aside (damage.go): the row's columns as
-- the claim table held them, untyped so that whatever the damage left is
-- kept as it was, and when it was found (unix ms).
CREATE TABLE IF NOT EXISTS quarantine(
	cid, key, pid, value, ts, sig, id, seq, found,
	PRIMARY KEY(cid, key, pid)
) WITHOUT ROWID;
`

// The cache: the v1 key/value layout for derived rows, plus real tables
// where a key/value row would not do. claim_by_pid is keyed by (pid, seq),
// the truth seq of the signer's first row for that (cid, key): new rows
// append at the end of each signer's range. Keyed by (pid, cid, key) they
// landed on a random page each (cids are hashes), which at a million
// claims cost a page read and a WAL frame for most claims.
const cacheDDL = `
CREATE TABLE IF NOT EXISTS kv(
	k TEXT PRIMARY KEY,
	v TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS claim_by_pid(
	pid INTEGER NOT NULL,
	seq INTEGER NOT NULL,
	cid TEXT NOT NULL,
	key TEXT NOT NULL,
	PRIMARY KEY(pid, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS local_file(
	path    TEXT PRIMARY KEY,
	midhash TEXT NOT NULL,
	size    INTEGER NOT NULL,
	mtime   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS local_file_midhash ON local_file(midhash, path);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(rid UNINDEXED, hay, tokenize='trigram');
`

// kvFieldIndexDDL: kv_field_v indexes merged rows by field name (what
// follows "file:<26-char rid>/", i.e. from character 33), then by row key,
// i.e. by rid, and carries the value so that filters never read the table.
// Ordered by rid rather than by value: a substring filter scans the
// field's entries either way, and the entries of new records (time-ordered
// rids) are appended at the end of each field's range instead of landing
// on a random page each, which made them the writer's main cost.
const kvFieldIndexDDL = `CREATE INDEX IF NOT EXISTS kv_field_v ON kv(lower(substr(k, 33)), k, v) WHERE k >= 'file:' AND k < 'file;'`

func tableNames(ctx context.Context, c *sql.Conn) (map[string]bool, error) {
	rows, err := c.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'table'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	names := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		names[n] = true
	}
	return names, rows.Err()
}

// prepareTruth is the schema gate: it refuses a v1 truth file (one with
// the kv table), a file stamped with another version, and a file holding
// claims without a stamp; it creates and stamps a fresh file. It returns
// the truth file's identity, which the cache records so that a cache from
// another truth file is never trusted.
func prepareTruth(ctx context.Context, c *sql.Conn, path string) (id string, created bool, err error) {
	names, err := tableNames(ctx, c)
	if err != nil {
		return "", false, err
	}
	if names["kv"] {
		return "", false, fmt.Errorf("%w: %s holds the v1 kv table (meta-core 1.x layout); convert it with the claims-migrate tool, or move the file away to start empty", ErrSchema, path)
	}
	version := ""
	if names["meta"] {
		err := c.QueryRowContext(ctx, `SELECT value FROM meta WHERE name = 'schema-version'`).Scan(&version)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return "", false, err
		}
	}
	switch {
	case version == truthVersion:
	case version != "":
		return "", false, fmt.Errorf("%w: %s %s", ErrSchema, path, schemaAdvice(version))
	case names["claim"]:
		var n int
		if err := c.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM claim LIMIT 1)`).Scan(&n); err != nil {
			return "", false, err
		}
		if n > 0 {
			return "", false, fmt.Errorf("%w: %s holds claims but no schema-version; it was not written by metanode: move it away to start empty", ErrSchema, path)
		}
	}
	// One transaction: a crash part-way through a schema change leaves
	// the file as it was, and the next start does it again.
	if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return "", false, fmt.Errorf("create truth schema: %w", err)
	}
	if err := createTruth(ctx, c, version, !names["group_edge"]); err != nil {
		_, _ = c.ExecContext(context.Background(), "ROLLBACK")
		return "", false, err
	}
	if _, err := c.ExecContext(ctx, "COMMIT"); err != nil {
		_, _ = c.ExecContext(context.Background(), "ROLLBACK")
		return "", false, fmt.Errorf("create truth schema: %w", err)
	}
	var truthID string
	if err := c.QueryRowContext(ctx, `SELECT value FROM meta WHERE name = 'truth-id'`).Scan(&truthID); err != nil {
		return "", false, fmt.Errorf("read truth id: %w", err)
	}
	return truthID, version == "", nil
}

// createTruth creates the truth tables, fills group_edge for a file from
// before it, and stamps a new file (inside prepareTruth's transaction).
func createTruth(ctx context.Context, c *sql.Conn, version string, noEdges bool) error {
	if _, err := c.ExecContext(ctx, truthDDL); err != nil {
		return fmt.Errorf("create truth schema: %w", err)
	}
	if version != "" && noEdges {
		// A truth file from before group_edge: its join evidence is the
		// live links it holds, and the retracted links whose two cids
		// share a record (the older layout never split one, so they were
		// joined). Signers already distrusted still hold their groups
		// joined: the writer splits them at boot (regroup_pending).
		_, err := c.ExecContext(ctx, `INSERT OR IGNORE INTO group_edge(cid, other, pid)
			SELECT cid, substr(key, 6), pid FROM claim WHERE key >= 'cids/' AND key < 'cids0' AND value = 'true';
			INSERT OR IGNORE INTO group_edge(cid, other, pid)
			SELECT c.cid, substr(c.key, 6), c.pid FROM claim c
				JOIN cid_group a ON a.cid = c.cid
				JOIN cid_group b ON b.cid = substr(c.key, 6)
			WHERE c.key >= 'cids/' AND c.key < 'cids0' AND c.value IS NULL AND a.rid = b.rid
				-- unless a live link on the pair explains the join (the
				-- retraction may be an "unlink" vote on another's link)
				AND NOT EXISTS (SELECT 1 FROM claim l WHERE l.value = 'true' AND
					((l.cid = c.cid AND l.key = c.key) OR (l.cid = substr(c.key, 6) AND l.key = 'cids/' || c.cid)));
			INSERT INTO meta(name, value) VALUES('regroup_pending', '1') ON CONFLICT(name) DO UPDATE SET value = excluded.value`)
		if err != nil {
			return fmt.Errorf("fill group edges: %w", err)
		}
	}
	if version == "" {
		id := make([]byte, 16)
		_, _ = rand.Read(id)
		_, err := c.ExecContext(ctx, `INSERT INTO meta(name, value) VALUES
			('schema-version', ?), ('truth-id', ?), ('last_seq', '0'), ('rebuild_seq', '0')
			ON CONFLICT(name) DO UPDATE SET value = excluded.value`, truthVersion, hex.EncodeToString(id))
		if err != nil {
			return fmt.Errorf("stamp truth schema: %w", err)
		}
	}
	return nil
}

// prepareCache creates the cache schema. It reports false when the file
// is not a cache this build wrote (another layout version): the caller
// then deletes it and starts over.
func prepareCache(ctx context.Context, c *sql.Conn) (bool, error) {
	names, err := tableNames(ctx, c)
	if err != nil {
		return false, err
	}
	if len(names) > 0 {
		var v string
		err := c.QueryRowContext(ctx, `SELECT v FROM kv WHERE k = 'meta:cache_version'`).Scan(&v)
		if err != nil || v != cacheVersion {
			return false, nil
		}
	} else {
		if err := setPageSize(ctx, c, cachePageSize); err != nil {
			return false, fmt.Errorf("set cache page size: %w", err)
		}
	}
	if _, err := c.ExecContext(ctx, cacheDDL); err != nil {
		return false, fmt.Errorf("create cache schema: %w", err)
	}
	if _, err := c.ExecContext(ctx, kvFieldIndexDDL); err != nil {
		return false, fmt.Errorf("create cache schema: %w", err)
	}
	if _, err := c.ExecContext(ctx, `INSERT OR IGNORE INTO kv(k, v) VALUES('meta:cache_version', ?)`, cacheVersion); err != nil {
		return false, fmt.Errorf("stamp cache: %w", err)
	}
	return true, nil
}

// setPageSize sets the page size of an empty database: a WAL database
// cannot change it once it holds anything. Larger pages: random inserts
// split pages less often, and a commit writes each dirty page with its own
// system calls.
func setPageSize(ctx context.Context, c *sql.Conn, size int) error {
	for _, q := range []string{"PRAGMA journal_mode=DELETE", fmt.Sprintf("PRAGMA page_size=%d", size), "VACUUM", "PRAGMA journal_mode=WAL"} {
		if _, err := c.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// removeDBFiles deletes a database and its WAL and shared-memory files.
func removeDBFiles(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func parseInt(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// schemaAdvice says what to do about a truth file of another schema
// version: which way the mismatch goes decides the remedy, and starting
// empty comes last, as it loses the claims only this node held.
func schemaAdvice(version string) string {
	const empty = "; as a last resort, moving the file away starts empty and loses the claims only this node held"
	v, err := strconv.Atoi(version)
	cur, _ := strconv.Atoi(truthVersion)
	switch {
	case err == nil && v > cur:
		return fmt.Sprintf("was written by a newer metanode (schema-version %q; this build reads %q): run that newer build, or restore the truth.db backup taken before the upgrade", version, truthVersion) + empty
	case err == nil && v < cur:
		return fmt.Sprintf("was written by an older metanode (schema-version %q; this build reads %q) that this build cannot migrate: run a build that reads it", version, truthVersion) + empty
	}
	return fmt.Sprintf("has schema-version %q and this build reads %q: use a matching metanode build", version, truthVersion) + empty
}
