package store

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
)

// TestWriterFaults: a failed truth transaction stores nothing and leaves
// the writer's memory as truth says; a failed cache transaction leaves the
// claims durable but unacknowledged, and the next batch catches the cache up.
func TestWriterFaults(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := New(Config{TruthPath: filepath.Join(dir, "t.db"), CachePath: filepath.Join(dir, "c.db"), Trust: TrustOpen,
		Logger: slog.New(slog.DiscardHandler)})
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
