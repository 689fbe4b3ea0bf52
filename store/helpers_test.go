package store_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

var ctx = context.Background()

// Fixed content ids for hand-written cases.
var (
	cidA = storetest.CID(1)
	cidB = storetest.CID(2)
	cidC = storetest.CID(3)
)

// testNow is the clock of stores in tests: claims up to ten minutes past
// it are accepted.
var testNow = func() time.Time { return time.UnixMilli(1_800_000_000_000) }

// paths returns truth and cache paths in a fresh directory.
func paths(t testing.TB) (string, string) {
	dir := t.TempDir()
	return filepath.Join(dir, "truth.db"), filepath.Join(dir, "cache.db")
}

// open returns an opened store (open trust unless cfg says otherwise).
func open(t testing.TB, cfg store.Config) *store.Store {
	t.Helper()
	if cfg.Now == nil {
		cfg.Now = testNow
	}
	return storetest.Open(t, cfg)
}

// reopen opens a store on existing files; the caller closes it.
func reopen(t testing.TB, cfg store.Config) *store.Store {
	t.Helper()
	if cfg.Now == nil {
		cfg.Now = testNow
	}
	if cfg.Trust == "" {
		cfg.Trust = store.TrustOpen
	}
	if cfg.Logger == nil {
		cfg.Logger = storetest.Logger(t, slog.LevelWarn)
	}
	s := store.New(cfg)
	if err := s.Open(ctx); err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

func submit(t testing.TB, s *store.Store, claims ...store.Claim) []store.Result {
	t.Helper()
	res, err := s.Submit(ctx, claims, store.SubmitOptions{})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	if len(res) != len(claims) {
		t.Fatalf("results=%d, want %d", len(res), len(claims))
	}
	return res
}

func outcomes(res []store.Result) []store.Outcome {
	out := make([]store.Outcome, len(res))
	for i, r := range res {
		out[i] = r.Outcome
	}
	return out
}

func record(t testing.TB, s *store.Store, h string) store.Record {
	t.Helper()
	rec, err := s.Record(ctx, h, "")
	if err != nil {
		t.Fatalf("record %s: %v", h, err)
	}
	return rec
}

// nextEvent waits for the subscription's next event (the deadline only
// guards against a hang; it is not a timing assertion).
func nextEvent(t testing.TB, sub *store.Subscription) store.Event {
	t.Helper()
	select {
	case e, ok := <-sub.C:
		if !ok {
			t.Fatalf("subscription closed: %v", sub.Err())
		}
		return e
	case <-time.After(20 * time.Second):
		t.Fatal("no event")
	}
	return store.Event{}
}

// eventKey reads "key" (or "path") of an event's data.
func eventKey(t testing.TB, e store.Event) string {
	t.Helper()
	var d map[string]string
	if err := json.Unmarshal(e.Data, &d); err != nil {
		t.Fatalf("event data %s: %v", e.Data, err)
	}
	if d["type"] != e.Type {
		t.Fatalf("event type %q, data type %q", e.Type, d["type"])
	}
	if k, ok := d["key"]; ok {
		return k
	}
	return d["path"]
}

// drainUntil reads events until one with key marker, returning those before.
func drainUntil(t testing.TB, sub *store.Subscription, marker string) []store.Event {
	t.Helper()
	var out []store.Event
	for {
		e := nextEvent(t, sub)
		if strings.HasSuffix(eventKey(t, e), marker) {
			return out
		}
		out = append(out, e)
	}
}
