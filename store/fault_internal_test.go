package store

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
)

// openQuiet opens an open-trust store in a temporary directory, closed
// when the test ends.
func openQuiet(t *testing.T) *Store {
	t.Helper()
	dir := t.TempDir()
	s := New(Config{TruthPath: filepath.Join(dir, "t.db"), CachePath: filepath.Join(dir, "c.db"), Trust: TrustOpen,
		Logger: slog.New(slog.DiscardHandler)})
	if err := s.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestWriterFaults: a failed truth transaction stores nothing and leaves
// the writer's memory as truth says; a failed cache transaction leaves the
// claims durable but unacknowledged, and the next batch catches the cache up.
func TestWriterFaults(t *testing.T) {
	ctx := context.Background()
	s := openQuiet(t)
	sg, _ := GenerateSigner()
	boom := errors.New("disk on fire")
	once := func(err error) func() error {
		return func() error { e := err; err = nil; return e }
	}

	s.failTruth = once(boom)
	c1 := sg.Text(testCID(1), "title", "one", 1)
	if _, err := s.Submit(ctx, []Claim{c1}, SubmitOptions{}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("submit with a failing truth: %v", err)
	}
	if ok, _ := s.HasCID(ctx, testCID(1)); ok {
		t.Fatal("a rolled-back group is still in memory")
	}
	if st, _ := s.Stats(ctx); st.Claims != 0 || st.Signers != 0 {
		t.Fatalf("stats after a rolled-back batch: %+v", st)
	}
	s.failTruth = nil

	s.failCache = once(boom)
	if _, err := s.Submit(ctx, []Claim{c1}, SubmitOptions{}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("submit with a failing cache: %v", err)
	}
	// Durable but not applied; the next batch catches up first.
	res, err := s.Submit(ctx, []Claim{sg.Text(testCID(1), "year", "2000", 1)}, SubmitOptions{})
	if err != nil || res[0].Outcome != Accepted {
		t.Fatalf("next submit: %v %v", res, err)
	}
	rec, err := s.Record(ctx, testCID(1), "")
	if err != nil || rec.Fields["title"] != "one" || rec.Fields["year"] != "2000" {
		t.Fatalf("record after catch-up: %v %v", rec.Fields, err)
	}
	if r, _ := s.Submit(ctx, []Claim{c1}, SubmitOptions{}); r[0].Outcome != Unchanged {
		t.Fatalf("the unacknowledged claim is not stored: %v", r[0].Outcome)
	}
	st, _ := s.Stats(ctx)
	if st.AppliedSeq != st.LastSeq || st.Claims != 2 || st.Records != 1 {
		t.Fatalf("stats=%+v", st)
	}
}

// TestSyncSetAfterCacheCommit: a claim enters the sync set only after the
// cache transaction that merges it has committed, so a peer that learns of
// it there finds its record merged; a failed cache transaction keeps it
// out until the catch-up commits.
func TestSyncSetAfterCacheCommit(t *testing.T) {
	ctx := context.Background()
	s := openQuiet(t)
	<-s.SyncReady()
	sg, _ := GenerateSigner()
	item := func(c Claim) SyncItem { return SyncItem{TS: c.TS, ID: c.ID()} }

	c1 := sg.Text(testCID(1), "title", "one", 1)
	var during []bool
	s.failCache = func() error { during = append(during, s.sync.Has(item(c1))); return nil }
	if res, err := s.Submit(ctx, []Claim{c1}, SubmitOptions{}); err != nil || res[0].Outcome != Accepted {
		t.Fatalf("submit: %v %v", res, err)
	}
	s.failCache = nil
	if len(during) != 1 || during[0] {
		t.Fatalf("in the sync set during the cache transaction: %v", during)
	}
	if !s.sync.Has(item(c1)) {
		t.Fatal("not in the sync set after the answer")
	}

	boom := errors.New("disk on fire")
	c2 := sg.Text(testCID(2), "title", "two", 2)
	s.failCache = func() error { s.failCache = nil; return boom }
	if _, err := s.Submit(ctx, []Claim{c2}, SubmitOptions{}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("submit with a failing cache: %v", err)
	}
	if s.sync.Has(item(c2)) {
		t.Fatal("a claim the cache has not merged is in the sync set")
	}
	c3 := sg.Text(testCID(3), "title", "three", 3)
	if _, err := s.Submit(ctx, []Claim{c3}, SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	if !s.sync.Has(item(c2)) || !s.sync.Has(item(c3)) {
		t.Fatal("the caught-up claims are not in the sync set")
	}
	if rec, err := s.Record(ctx, testCID(2), ""); err != nil || rec.Fields["title"] != "two" {
		t.Fatalf("record after catch-up: %v %v", rec.Fields, err)
	}
}

// TestCacheRollbackDropsQueuedRows: merged values and event rows wait in a
// queue until a statement reads or deletes kv rows or the commit; a failed
// cache transaction must drop the queue, or the catch-up's first read
// would write the rolled-back rows outside any transaction.
func TestCacheRollbackDropsQueuedRows(t *testing.T) {
	ctx := context.Background()
	s := openQuiet(t)
	sg, _ := GenerateSigner()
	boom := errors.New("disk on fire")
	s.failCache = func() error { return boom }
	for i := range 2 { // the second one's catch-up fails too
		c := sg.Text(testCID(10+i), "title", "x", 1)
		if _, err := s.Submit(ctx, []Claim{c}, SubmitOptions{}); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("submit %d with a failing cache: %v", i, err)
		}
	}
	db, err := sql.Open("sqlite", "file:"+s.cfg.CachePath+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM kv WHERE (k >= 'file:' AND k < 'file;') OR (k >= 'ev:' AND k < 'ev;')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d merged or event rows of rolled-back cache transactions were written", n)
	}
	s.failCache = nil
	if _, err := s.Submit(ctx, []Claim{sg.Text(testCID(12), "title", "y", 1)}, SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.Record(ctx, testCID(10), ""); err != nil || rec.Fields["title"] != "x" {
		t.Fatalf("record after the catch-up: %v %v", rec.Fields, err)
	}
}

// TestRecheckOnCIDWithoutGroup: a claim Submit passed unverified because it
// looked stored, whose cid has no group by the time the writer sees it (a
// Clear ran in between), is verified before it can make a record: a
// forged copy leaves no group behind.
func TestRecheckOnCIDWithoutGroup(t *testing.T) {
	ctx := context.Background()
	s := openQuiet(t)
	sg, _ := GenerateSigner()
	c := sg.Text(testCID(7), "title", "forged", 1)
	c.Sig[0] ^= 0xff
	r := &request{kind: reqSubmit, claims: []Claim{c}, ids: []ID{c.ID()}, results: make([]Result, 1), recheck: []bool{true}}
	if err := s.do(ctx, r); err != nil {
		t.Fatal(err)
	}
	if r.results[0].Outcome != Rejected || !errors.Is(r.results[0].Err, ErrBadSignature) {
		t.Fatalf("forged recheck claim: %v %v", r.results[0].Outcome, r.results[0].Err)
	}
	if ok, _ := s.HasCID(ctx, testCID(7)); ok {
		t.Fatal("a rejected claim made a group")
	}
	if st, _ := s.Stats(ctx); st.Records != 0 {
		t.Fatalf("records=%d after a rejected claim", st.Records)
	}
}
