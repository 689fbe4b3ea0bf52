package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// TestOpen_DamagedTruth: a truth file that is not an SQLite database (a
// bad copy, a disk error) is refused with ErrDamaged and a message that
// says what to do, and is left as it was.
func TestOpen_DamagedTruth(t *testing.T) {
	dir := t.TempDir()
	truth := filepath.Join(dir, "truth.db")
	junk := []byte(strings.Repeat("not an sqlite file ", 512))
	if err := os.WriteFile(truth, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	s := store.New(store.Config{TruthPath: truth, CachePath: filepath.Join(dir, "cache.db")})
	err := s.Open(context.Background())
	if err == nil {
		_ = s.Close()
		t.Fatal("a damaged truth file opened")
	}
	if !errors.Is(err, store.ErrDamaged) || !strings.Contains(err.Error(), "restore truth.db from a backup") {
		t.Fatalf("error %q: want ErrDamaged with what to do", err)
	}
	if got, _ := os.ReadFile(truth); string(got) != string(junk) {
		t.Error("the damaged file was changed")
	}
}

// damagedFixture writes a closed store of the 200-claim reference dataset
// and returns its truth and cache files' bytes.
func damagedFixture(t *testing.T) (truth, cache []byte) {
	t.Helper()
	tp, cp := paths(t)
	s := reopen(t, store.Config{TruthPath: tp, CachePath: cp})
	claims, err := storetest.Fixture(t, 200).Claims()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, claims, store.SubmitOptions{Verified: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{tp, cp} {
		if fi, err := os.Stat(p + "-wal"); err == nil && fi.Size() > 0 {
			t.Fatalf("%s-wal holds %d bytes after Close: pages garbled in the main file would not be read", p, fi.Size())
		}
	}
	truth, err = os.ReadFile(tp)
	if err != nil {
		t.Fatal(err)
	}
	cache, err = os.ReadFile(cp)
	if err != nil {
		t.Fatal(err)
	}
	return truth, cache
}

// garble overwrites page pg of a copy of file with random bytes, as dd
// from /dev/urandom would.
func garble(file []byte, pg, pageSize int) []byte {
	out := bytes.Clone(file)
	r := rand.New(rand.NewPCG(uint64(pg), 7))
	for i := pg * pageSize; i < (pg+1)*pageSize && i < len(out); i++ {
		out[i] = byte(r.Uint32())
	}
	return out
}

// openFiles opens a store on the given file contents (nil: no such file)
// in a fresh directory under dir; it returns Open's error, closing a store
// that opened. Safe to call from several goroutines.
func openFiles(t *testing.T, dir string, truth, cache []byte) error {
	tp, cp := filepath.Join(dir, "truth.db"), filepath.Join(dir, "cache.db")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for p, b := range map[string][]byte{tp: truth, cp: cache} {
		if b != nil {
			if err := os.WriteFile(p, b, 0o600); err != nil {
				return err
			}
		}
	}
	s := store.New(store.Config{TruthPath: tp, CachePath: cp, Trust: store.TrustOpen, Now: testNow,
		Logger: storetest.Logger(t, slog.LevelError+1)}) // errors of the damaged runs are expected
	err := s.Open(ctx)
	if err == nil {
		if cerr := s.Close(); cerr != nil {
			t.Errorf("close: %v", cerr)
		}
	}
	return err
}

// eachPage runs fn for pages 0..n-1 of which keep(pg), four at a time
// (an Open is mostly waiting on fsync), and returns fn's errors by page.
func eachPage(n int, keep func(int) bool, fn func(pg int) error) map[int]error {
	var mu sync.Mutex
	errs := map[int]error{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for pg := range n {
		if !keep(pg) {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			err := fn(pg)
			mu.Lock()
			errs[pg] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	return errs
}

// TestOpen_GarbledTruthPages garbles one 4 KiB page of a real truth file
// at a time, with the cache removed (the boot then reads all of truth to
// rebuild it): every failure that reaches Open, whichever step met the
// bad page (the schema, loading truth's state, the rebuild), is ErrDamaged
// with what to do, not a raw SQL error. Pages whose damage Open does not
// read may open (a later read finds them). Garbled cache pages (every
// other one), truth intact, always open: a cache that opens damaged is
// rebuilt, one found damaged later in the start is deleted and Open runs
// again.
func TestOpen_GarbledTruthPages(t *testing.T) {
	truth, cache := damagedFixture(t)
	root := t.TempDir()
	all := func(int) bool { return true }
	errs := eachPage(len(truth)/4096, all, func(pg int) error {
		return openFiles(t, filepath.Join(root, fmt.Sprintf("truth-%d", pg)), garble(truth, pg, 4096), nil)
	})
	failed := 0
	for pg, err := range errs {
		if err == nil {
			continue
		}
		failed++
		if !errors.Is(err, store.ErrDamaged) || !strings.Contains(err.Error(), "restore truth.db from a backup") {
			t.Errorf("truth page %d: %v; want ErrDamaged with what to do", pg, err)
		}
	}
	t.Logf("%d of %d garbled truth pages failed Open", failed, len(errs))
	if failed == 0 {
		t.Fatal("no garbled truth page failed Open: the test no longer reaches the start-up paths")
	}
	errs = eachPage(len(cache)/8192, func(pg int) bool { return pg%2 == 0 }, func(pg int) error {
		return openFiles(t, filepath.Join(root, fmt.Sprintf("cache-%d", pg)), truth, garble(cache, pg, 8192))
	})
	for pg, err := range errs {
		if err != nil {
			t.Errorf("cache page %d: %v; truth is intact, so a damaged cache is deleted and rebuilt", pg, err)
		}
	}
}

// logBuffer collects a store's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) warns(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for line := range strings.Lines(l.b.String()) {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

// TestOpen_EmptyOrMissingTruth: a 0-byte truth.db (a failed copy or
// restore) is refused, left as it was, with what to do; deleted as the
// error says, the node starts empty, and since the cache beside it was of
// the lost truth, says so at WARN naming both files, once. A first start
// (no truth, no cache) says nothing.
func TestOpen_EmptyOrMissingTruth(t *testing.T) {
	tp, cp := paths(t)
	var logs logBuffer
	cfg := store.Config{TruthPath: tp, CachePath: cp, Trust: store.TrustOpen, Now: testNow,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	const warning = "a new, empty truth.db was made next to a cache of another one"
	s := reopen(t, cfg)
	submit(t, s, storetest.Signer(1).Text(cidA, "title", "kept?", uint64(testNow().UnixMilli())))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := logs.warns(warning); n != 0 {
		t.Fatalf("a first start warned %d times", n)
	}

	if err := os.Truncate(tp, 0); err != nil {
		t.Fatal(err)
	}
	s = store.New(cfg)
	err := s.Open(ctx)
	if err == nil {
		_ = s.Close()
		t.Fatal("a 0-byte truth.db opened")
	}
	want := tp + " is empty (0 bytes): restore it from a backup (docs/operations.md, Restore), or delete it to start empty"
	if !errors.Is(err, store.ErrDamaged) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want ErrDamaged saying %q", err, want)
	}
	if fi, err := os.Stat(tp); err != nil || fi.Size() != 0 {
		t.Fatalf("the empty truth.db was changed: %v", err)
	}

	if err := os.Remove(tp); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, cfg)
	defer s.Close()
	if n := logs.warns(warning); n != 1 {
		t.Fatalf("%d WARN lines about a new truth beside another's cache, want 1:\n%s", n, logs.b.String())
	}
	if n := logs.warns("cache=" + cp); n != 1 || logs.warns("truth="+tp) != 1 {
		t.Fatalf("the WARN line does not name both files:\n%s", logs.b.String())
	}
	if st, err := s.Stats(ctx); err != nil || st.Claims != 0 {
		t.Fatalf("stats %+v, %v: want an empty store", st, err)
	}
}

// TestRead_DamagedWhileOpen: a page of cache.db or truth.db damaged while
// the store is open (a failing disk) makes the reads that meet it fail
// with what to do, and from then on ReadHealth reports it (the node's
// /health is degraded), while a store whose reads met no damage reports
// nothing. Each page of the middle of both files is garbled in a fresh
// copy, after Open, and everything is read.
func TestRead_DamagedWhileOpen(t *testing.T) {
	truth, cache := damagedFixture(t)
	root := t.TempDir()
	var mu sync.Mutex
	met := 0
	check := func(name string, pg, pageSize int) error {
		dir := filepath.Join(root, fmt.Sprintf("%s-%d", name, pg))
		tp, cp := filepath.Join(dir, "truth.db"), filepath.Join(dir, "cache.db")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(tp, truth, 0o600); err != nil {
			return err
		}
		if err := os.WriteFile(cp, cache, 0o600); err != nil {
			return err
		}
		s := store.New(store.Config{TruthPath: tp, CachePath: cp, Trust: store.TrustOpen, Now: testNow,
			Logger: storetest.Logger(t, slog.LevelError+1)})
		if err := s.Open(ctx); err != nil {
			return fmt.Errorf("open before the damage: %w", err)
		}
		defer s.Close()
		file, orig := cp, cache
		if name == "truth" {
			file, orig = tp, truth
		}
		f, err := os.OpenFile(file, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteAt(garble(orig, pg, pageSize)[pg*pageSize:(pg+1)*pageSize], int64(pg*pageSize))
		f.Close()
		if err != nil {
			return err
		}
		readErr := readEverything(s)
		if readErr == nil {
			if h := s.ReadHealth(); h != nil {
				return fmt.Errorf("no read failed, yet ReadHealth says %v", h)
			}
			return nil
		}
		mu.Lock()
		met++
		mu.Unlock()
		if !strings.Contains(readErr.Error(), "a database file is damaged: stop the node and delete cache.db") {
			return fmt.Errorf("a read failed without saying what to do: %v", readErr)
		}
		if h := s.ReadHealth(); h == nil || !strings.Contains(h.Error(), "delete cache.db") {
			return fmt.Errorf("a read met damage (%v), ReadHealth says %v", readErr, h)
		}
		// What to do is said once, however many reads the error went through.
		if n, h := strings.Count(readErr.Error(), "stop the node"), s.ReadHealth().Error(); n != 1 || strings.Count(h, "stop the node") != 1 {
			return fmt.Errorf("the advice is repeated: %v; health: %v", readErr, h)
		}
		return nil
	}
	for name, f := range map[string]struct {
		size, page int
	}{"cache": {len(cache), 8192}, "truth": {len(truth), 4096}} {
		n := f.size / f.page
		errs := eachPage(n, func(pg int) bool { return pg > 1 && pg < n-1 && pg%2 == 0 }, func(pg int) error {
			return check(name, pg, f.page)
		})
		for pg, err := range errs {
			if err != nil {
				t.Errorf("%s page %d: %v", name, pg, err)
			}
		}
	}
	t.Logf("%d garbled pages met by a read", met)
	if met == 0 {
		t.Fatal("no read met a garbled page: the test no longer reaches damaged pages")
	}
}

// readEverything reads every record, its claims, the lists, the search,
// schema, stats and files, and returns the first error that is not "not
// found" (a garbled index may hide a record).
func readEverything(s *store.Store) error {
	var first error
	note := func(err error) {
		if err != nil && strings.Count(err.Error(), "stop the node") > 1 {
			first = err // what to do, said more than once
		}
		if err != nil && first == nil && !errors.Is(err, store.ErrNotFound) {
			first = err
		}
	}
	items, _, err := s.List(ctx, 0, 10000)
	note(err)
	rids, err := s.RIDs(ctx)
	note(err)
	for _, it := range items {
		rids = append(rids, it.RID)
	}
	for _, rid := range rids {
		rec, err := s.Record(ctx, rid, "")
		note(err)
		_, err = s.Claims(ctx, rid, store.ClaimFilter{})
		note(err)
		if len(rec.CIDs) > 0 { // by cid too, as GET /api/meta/{cid}/claims reads
			_, err = s.Claims(ctx, rec.CIDs[0], store.ClaimFilter{})
			note(err)
		}
	}
	_, _, err = s.Search(ctx, store.SearchQuery{Query: "a", Limit: 10000})
	note(err)
	_, err = s.Schema(ctx)
	note(err)
	_, err = s.Stats(ctx)
	note(err)
	_, _, err = s.FileTuples(ctx)
	note(err)
	_, err = s.CIDs(ctx, "", 100000)
	note(err)
	return first
}
