package store

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"testing"
	"time"
)

// failLinkThenCatchUp makes one batch holding a link fail in its cache
// transaction, so that the next batch starts with a catch-up that has to
// be a full rebuild (the link joined groups in truth), and returns that
// next batch's function (run it to trigger the runtime rebuild).
func failLinkThenCatchUp(t *testing.T, s *Store, sg *Signer, a, b, next string) func() error {
	t.Helper()
	ctx := context.Background()
	s.failCache = func() error { s.failCache = nil; return errors.New("disk full") }
	if _, err := s.Submit(ctx, []Claim{sg.Text(a, "cids/"+b, "true", 2)}, SubmitOptions{}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("link with a failing cache: %v", err)
	}
	return func() error {
		_, err := s.Submit(ctx, []Claim{sg.Text(next, "title", "after", 3)}, SubmitOptions{})
		return err
	}
}

// metaKey reads "key" of a meta event.
func metaKey(t *testing.T, e Event) string {
	t.Helper()
	var d map[string]string
	if err := json.Unmarshal(e.Data, &d); err != nil {
		t.Fatalf("event data %s: %v", e.Data, err)
	}
	return d["key"]
}

// cacheMergedKeys lists every merged key the cache holds.
func cacheMergedKeys(t *testing.T, s *Store) map[string]bool {
	t.Helper()
	rows, err := s.cacheR.QueryContext(context.Background(), `SELECT k FROM kv WHERE k >= 'file:' AND k < 'file;'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		out[k] = true
	}
	return out
}

// TestRuntimeRebuild_LiveSubscriberEndsIntoGap: a catch-up rebuild at
// runtime (after a failed cache transaction on a batch with a link) joins
// two records without per-key events. A consumer that follows the meta
// stream the documented way (snapshot, subscribe after its id, on an ended
// subscription resubscribe with its last id, on a Gap take a new snapshot)
// must end up holding exactly the cache's merged keys: its live
// subscription is ended, it reconnects into the rebuild's gap and
// re-snapshots, instead of keeping the absorbed record's keys for good.
func TestRuntimeRebuild_LiveSubscriberEndsIntoGap(t *testing.T) {
	ctx := context.Background()
	s := openQuiet(t)
	sg, _ := GenerateSigner()
	c1, c2, c3 := testCID(71), testCID(72), testCID(73)
	if _, err := s.Submit(ctx, []Claim{sg.Text(c1, "title", "one", 1), sg.Text(c2, "year", "2001", 1)}, SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	snapshot := func() string {
		clear(keys)
		id, err := s.Snapshot(ctx, func(e Event) error { keys[metaKey(t, e)] = true; return nil })
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	last := snapshot()
	sub, err := s.Subscribe(StreamMeta, last)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { sub.Close() }()
	rid1, _ := s.Resolve(ctx, c1)
	rid2, _ := s.Resolve(ctx, c2)
	if err := failLinkThenCatchUp(t, s, sg, c1, c2, c3)(); err != nil {
		t.Fatal(err)
	}
	if r1, _ := s.Resolve(ctx, c1); r1 != min(rid1, rid2) {
		t.Fatalf("the link did not join the records: %s, %s → %s", rid1, rid2, r1)
	}
	evs, err := s.readEvents(ctx, StreamMeta, "", 1<<20)
	if err != nil || len(evs) == 0 {
		t.Fatalf("events: %d, %v", len(evs), err)
	}
	newest := evs[len(evs)-1].ID // the next batch's last event
	ended, gaps := 0, 0
	deadline := time.After(20 * time.Second) // guards a hang only
	for last < newest {
		select {
		case e, ok := <-sub.C:
			if !ok {
				ended++
				if !errors.Is(sub.Err(), ErrSlowConsumer) || ended > 2 {
					t.Fatalf("subscription ended (%d) with %v", ended, sub.Err())
				}
				if sub, err = s.Subscribe(StreamMeta, last); err != nil {
					t.Fatal(err)
				}
				if sub.Gap != nil {
					gaps++
					snapshot()
				}
				continue
			}
			last = e.ID
			if e.Type == "set" {
				keys[metaKey(t, e)] = true
			} else {
				delete(keys, metaKey(t, e))
			}
		case <-deadline:
			t.Fatalf("stuck at %s, newest %s", last, newest)
		}
	}
	if want := cacheMergedKeys(t, s); !maps.Equal(keys, want) {
		t.Fatalf("the consumer holds %v, the cache %v (ended %d times, %d gaps)", keys, want, ended, gaps)
	}
	if ended != 1 || gaps != 1 {
		t.Fatalf("want the live subscription ended once into one gap, got %d ends, %d gaps", ended, gaps)
	}
}

// TestRuntimeRebuild_ReadersKeepTheOldCache: while a catch-up rebuild runs
// after boot, readers see the cache as it was before it (one transaction),
// never a half-filled one: an untouched record stays readable and List's
// total never drops.
func TestRuntimeRebuild_ReadersKeepTheOldCache(t *testing.T) {
	ctx := context.Background()
	s := openQuiet(t)
	sg, _ := GenerateSigner()
	n := 600
	claims := make([]Claim, n)
	for i := range claims {
		claims[i] = sg.Text(testCID(10_000+i), "title", "t", 1)
	}
	for lo := 0; lo < n; lo += 300 {
		if _, err := s.Submit(ctx, claims[lo:lo+300], SubmitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	newest := testCID(10_000 + n - 1) // its rid is written last by a rebuild
	if _, err := s.Record(ctx, newest, ""); err != nil {
		t.Fatal(err)
	}
	next := failLinkThenCatchUp(t, s, sg, testCID(1), testCID(2), testCID(3))
	done := make(chan error, 1)
	go func() { done <- next() }()
	misses, reads, minTotal := 0, 0, n
	for polling := true; polling; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			polling = false
		default:
		}
		reads++
		if _, err := s.Record(ctx, newest, ""); errors.Is(err, ErrNotFound) {
			misses++
		}
		if _, total, err := s.List(ctx, 0, 1); err == nil && total < minTotal {
			minTotal = total
		}
	}
	if misses > 0 || minTotal < n {
		t.Fatalf("during the runtime rebuild %d of %d reads of an untouched record answered not found; List's total fell to %d of %d",
			misses, reads, minTotal, n)
	}
	t.Logf("%d reads during the catch-up", reads)
}
