package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// dumpCache reads every derived row of a cache file that must not depend
// on how the cache got there: merged rows, cid rows, the record index and
// the hidden groups, counters, claim_by_pid and the search rows (by rid,
// not rowid).
func dumpCache(t testing.TB, path string) map[string]string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]string{}
	q := func(query string, fn func(a, b string)) {
		rows, err := db.Query(query)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		defer rows.Close()
		for rows.Next() {
			var a, b string
			if err := rows.Scan(&a, &b); err != nil {
				t.Fatal(err)
			}
			fn(a, b)
		}
	}
	q(`SELECT k, v FROM kv WHERE (k >= 'file:' AND k < 'file;') OR (k >= 'cid:' AND k < 'cid;') OR
		(k >= 'idx:roots/' AND k < 'idx:roots0') OR (k >= 'idx:hidden/' AND k < 'idx:hidden0') OR
		(k >= 'idx:schema/' AND k < 'idx:schema0') OR (k >= 'idx:count/' AND k < 'idx:count0')`,
		func(k, v string) { out[k] = v })
	q(`SELECT pid || '/' || cid, key FROM claim_by_pid`, func(a, b string) { out["cbp:"+a+"/"+b] = "1" })
	q(`SELECT rid, hay FROM fts`, func(rid, hay string) { out["fts:"+rid] = hay })
	return out
}

func diffMaps(t testing.TB, got, want map[string]string) {
	t.Helper()
	if maps.Equal(got, want) {
		return
	}
	n := 0
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s: got %q (present %v), want %q", k, g, ok, v)
			if n++; n > 10 {
				break
			}
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s=%q should not be there", k, v)
			if n++; n > 20 {
				break
			}
		}
	}
	t.FailNow()
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// logSink collects log messages.
type logSink struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (l *logSink) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.msgs = append(l.msgs, r.Message)
	l.mu.Unlock()
	return nil
}
func (l *logSink) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logSink) WithGroup(string) slog.Handler      { return l }
func (l *logSink) has(prefix string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.msgs, func(m string) bool { return strings.HasPrefix(m, prefix) })
}

// rebuilt returns what a full rebuild gives: a copy of the cache whose
// applied_seq is removed is rebuilt from truth at boot (local files, not
// derived from truth, are kept).
func rebuilt(t testing.TB, truth, cache string) map[string]string {
	t.Helper()
	cp := t.TempDir() + "/rebuilt.db"
	copyFile(t, cache, cp)
	db, err := sql.Open("sqlite", cp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM kv WHERE k = 'meta:applied_seq'`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	logs := &logSink{}
	s := reopen(t, store.Config{TruthPath: truth, CachePath: cp, Logger: slog.New(logs)})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !logs.has("rebuilding") {
		t.Fatal("no rebuild")
	}
	return dumpCache(t, cp)
}

func TestSchemaGate(t *testing.T) {
	mk := func(t *testing.T, stmts ...string) string {
		tp, _ := paths(t)
		db, err := sql.Open("sqlite", tp)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, q := range stmts {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		return tp
	}
	cases := []struct {
		name   string
		stmts  []string
		accept bool
		hint   string
	}{
		{"V1KVTable", []string{`CREATE TABLE kv(k TEXT PRIMARY KEY, v TEXT NOT NULL)`, `INSERT INTO kv VALUES('meta-core:schema-version', '2')`}, false, "claims-migrate"},
		{"NewerVersion", []string{`CREATE TABLE meta(name TEXT PRIMARY KEY, value TEXT NOT NULL)`, `INSERT INTO meta VALUES('schema-version', '4')`}, false, "newer metanode (schema-version \"4\"; this build reads \"3\"): run that newer build, or restore the truth.db backup taken before the upgrade"},
		{"OlderVersion", []string{`CREATE TABLE meta(name TEXT PRIMARY KEY, value TEXT NOT NULL)`, `INSERT INTO meta VALUES('schema-version', '2')`}, false, "older metanode"},
		{"OddVersion", []string{`CREATE TABLE meta(name TEXT PRIMARY KEY, value TEXT NOT NULL)`, `INSERT INTO meta VALUES('schema-version', 'x')`}, false, "loses the claims only this node held"},
		{"ClaimsWithoutVersion", []string{`CREATE TABLE claim(cid TEXT, key TEXT, pid INTEGER, value ANY, ts INTEGER, sig BLOB, id BLOB, seq INTEGER)`,
			`INSERT INTO claim VALUES('c', 'k', 1, 'v', 1, x'00', x'00', 1)`}, false, "no schema-version"},
		{"EmptyClaimTableIsStamped", []string{`CREATE TABLE claim(cid TEXT, key TEXT, pid INTEGER, value ANY, ts INTEGER, sig BLOB, id BLOB, seq INTEGER, PRIMARY KEY(cid, key, pid))`}, true, ""},
		{"Fresh", nil, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tp := mk(t, tc.stmts...)
			_, cp := paths(t)
			s := store.New(store.Config{TruthPath: tp, CachePath: cp, Logger: storetest.Logger(t, slog.LevelWarn)})
			err := s.Open(ctx)
			if tc.accept {
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				s.Close()
				db, _ := sql.Open("sqlite", tp)
				defer db.Close()
				var v string
				if err := db.QueryRow(`SELECT value FROM meta WHERE name = 'schema-version'`).Scan(&v); err != nil || v != "3" {
					t.Fatalf("stamp=%q %v", v, err)
				}
				return
			}
			if !errors.Is(err, store.ErrSchema) || !strings.Contains(err.Error(), tc.hint) {
				t.Fatalf("open: %v, want ErrSchema mentioning %q", err, tc.hint)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("close after a failed open: %v", err)
			}
		})
	}
}

// seed submits a mix: several signers, replaced rows, retractions, links.
func seedClaims(n int, links bool) []store.Claim {
	signers := storetest.Signers(3)
	return storetest.Claims(n, func(i int) (*store.Signer, store.Claim) {
		c := store.Claim{CID: storetest.CID(i % (n / 6)), Key: []string{"title", "year", "genres/Drama", "plot"}[i%4],
			Kind: store.KindText, Value: fmt.Appendf(nil, "v%d", i%7), TS: uint64(1000 + i)}
		switch {
		case links && i%29 == 0:
			c.Key, c.Value = "cids/"+storetest.CID(i%(n/6)+1), []byte("true")
		case i%13 == 0:
			c.Kind, c.Value = store.KindRetraction, nil
		}
		return signers[i%3], c
	})
}

func TestRecovery(t *testing.T) {
	for _, tc := range []struct {
		name    string
		links   bool
		rebuild bool
	}{
		{"CatchUp", false, false},
		{"LinkMeansRebuild", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp, cp := paths(t)
			claims := seedClaims(300, tc.links)
			s := reopen(t, store.Config{TruthPath: tp, CachePath: cp})
			if _, err := s.Submit(ctx, claims[:150], store.SubmitOptions{}); err != nil {
				t.Fatal(err)
			}
			applyFiles(t, s, store.FileUpdate{Op: store.FileAdd, File: lf("/x/a", storetest.CID(2), 5)})
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// Keep the cache as it was, let truth move on, then put the old
			// cache back: the cache is behind, as after a crash between the
			// truth and the cache commits.
			old := cp + ".old"
			copyFile(t, cp, old)
			s = reopen(t, store.Config{TruthPath: tp, CachePath: cp})
			for lo := 150; lo < 300; lo += 30 {
				if _, err := s.Submit(ctx, claims[lo:lo+30], store.SubmitOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			want := dumpCache(t, cp)
			copyFile(t, old, cp)
			logs := &logSink{}
			s = reopen(t, store.Config{TruthPath: tp, CachePath: cp, Logger: slog.New(logs)})
			st, _ := s.Stats(ctx)
			if st.AppliedSeq != st.LastSeq {
				t.Fatalf("applied=%d last=%d after boot", st.AppliedSeq, st.LastSeq)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if got := logs.has("rebuilding"); got != tc.rebuild {
				t.Fatalf("rebuilt=%v, want %v (logs %v)", got, tc.rebuild, logs.msgs)
			}
			got := dumpCache(t, cp)
			diffMaps(t, got, want)
			diffMaps(t, got, rebuilt(t, tp, cp))
		})
	}
}

func TestRecovery_CacheFiles(t *testing.T) {
	tp, cp := paths(t)
	claims := seedClaims(120, true)
	s := reopen(t, store.Config{TruthPath: tp, CachePath: cp})
	if _, err := s.Submit(ctx, claims, store.SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	want := dumpCache(t, cp)
	for _, tc := range []struct {
		name   string
		break_ func()
	}{
		{"Deleted", func() { os.Remove(cp); os.Remove(cp + "-wal"); os.Remove(cp + "-shm") }},
		{"Garbage", func() {
			os.Remove(cp + "-wal")
			os.Remove(cp + "-shm")
			os.WriteFile(cp, []byte("not a database at all, not at all"), 0o600)
		}},
		{"OtherTruth", func() {
			otp, ocp := paths(t)
			o := reopen(t, store.Config{TruthPath: otp, CachePath: ocp})
			o.Close()
			os.Remove(cp + "-wal")
			os.Remove(cp + "-shm")
			copyFile(t, ocp, cp)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.break_()
			logs := &logSink{}
			s := reopen(t, store.Config{TruthPath: tp, CachePath: cp, Logger: slog.New(logs)})
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if !logs.has("rebuilding") {
				t.Fatal("no rebuild")
			}
			diffMaps(t, dumpCache(t, cp), want)
		})
	}
	// A clean restart serves at once: no rebuild, no catch-up.
	logs := &logSink{}
	s = reopen(t, store.Config{TruthPath: tp, CachePath: cp, Logger: slog.New(logs)})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if logs.has("rebuilding") || logs.has("cache caught up") {
		t.Fatalf("a clean restart did work: %v", logs.msgs)
	}
}
