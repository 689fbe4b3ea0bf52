package store_test

import (
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// addFiles registers n files (one file event and a few meta events each)
// without signing anything.
func addFiles(t testing.TB, s *store.Store, from, n int) []store.FileResult {
	t.Helper()
	ups := make([]store.FileUpdate, n)
	for i := range ups {
		ups[i] = store.FileUpdate{Op: store.FileAdd, File: store.LocalFile{
			Path: fmt.Sprintf("/files/f%06d.mkv", from+i), CID: storetest.MidhashCID(from + i), Size: int64(100 + i), MtimeNano: int64(i)}}
	}
	res, err := s.ApplyFiles(ctx, ups)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// collect reads n events.
func collect(t testing.TB, sub *store.Subscription, n int) []store.Event {
	t.Helper()
	out := make([]store.Event, n)
	for i := range out {
		out[i] = nextEvent(t, sub)
	}
	return out
}

func ids(evs []store.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

func TestSubscribe_LiveAndResume(t *testing.T) {
	s := open(t, store.Config{})
	all, err := s.Subscribe(store.StreamFiles, "")
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	addFiles(t, s, 0, 5)
	first := collect(t, all, 5)
	for i := 1; i < len(first); i++ {
		if first[i].ID <= first[i-1].ID {
			t.Fatalf("ids not increasing: %v", ids(first))
		}
	}
	if first[0].Type != "add" || eventKey(t, first[0]) != "/files/f000000.mkv" {
		t.Fatalf("first event %s %s", first[0].Type, first[0].Data)
	}
	// Resume strictly after the second event: the rest, then the live tail.
	sub, err := s.Subscribe(store.StreamFiles, first[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if sub.Gap != nil {
		t.Fatalf("gap for a retained cursor: %+v", sub.Gap)
	}
	addFiles(t, s, 5, 2)
	got := collect(t, sub, 5)
	want := append(ids(first[2:]), ids(collect(t, all, 2))...)
	if strings.Join(ids(got), ",") != strings.Join(want, ",") {
		t.Fatalf("resumed %v, want %v", ids(got), want)
	}
	// "0" replays everything retained.
	zero, err := s.Subscribe(store.StreamFiles, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer zero.Close()
	if got := collect(t, zero, 7); got[0].ID != first[0].ID {
		t.Fatalf("replay from 0 starts at %s", got[0].ID)
	}
	sub.Close()
	if _, ok := <-sub.C; ok {
		t.Fatal("C open after Close")
	}
	if sub.Err() != nil {
		t.Fatalf("Err after Close=%v", sub.Err())
	}
	if _, err := s.Subscribe(store.StreamFiles, "not-an-id"); !errors.Is(err, store.ErrMalformed) {
		t.Fatalf("garbage cursor: %v", err)
	}
	if _, err := s.Subscribe("nope", ""); err == nil {
		t.Fatal("unknown stream accepted")
	}
}

// TestSubscribe_NoLossNoDuplicates: a resume that races the writer gets
// every event after its cursor exactly once, in order.
func TestSubscribe_NoLossNoDuplicates(t *testing.T) {
	s := open(t, store.Config{})
	ref, err := s.Subscribe(store.StreamFiles, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	const rounds, per = 40, 5
	var wg sync.WaitGroup
	wg.Go(func() {
		for r := range rounds {
			addFiles(t, s, r*per, per)
		}
	})
	var cursor string
	var subs []*store.Subscription
	var from []int
	seen := 0
	// While the writer runs, resume from wherever the reference got to.
	for seen < rounds*per {
		e := nextEvent(t, ref)
		seen++
		cursor = e.ID
		if seen%37 == 0 {
			sub, err := s.Subscribe(store.StreamFiles, cursor)
			if err != nil {
				t.Fatal(err)
			}
			subs, from = append(subs, sub), append(from, seen)
		}
	}
	wg.Wait()
	refIDs := []string{}
	replay, _ := s.Subscribe(store.StreamFiles, "0")
	defer replay.Close()
	for range rounds * per {
		refIDs = append(refIDs, nextEvent(t, replay).ID)
	}
	for i, sub := range subs {
		got := ids(collect(t, sub, rounds*per-from[i]))
		want := refIDs[from[i]:]
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("subscription %d from event %d: got %d events, differing from the reference", i, from[i], len(got))
		}
		sub.Close()
	}
}

func TestSubscribe_Gap(t *testing.T) {
	s := open(t, store.Config{EventRetention: 10})
	first, _ := s.Subscribe(store.StreamFiles, "")
	defer first.Close()
	addFiles(t, s, 0, 1)
	oldest := nextEvent(t, first).ID
	for i := 1; i < 200; i += 20 {
		addFiles(t, s, i, 20)
	}
	sub, err := s.Subscribe(store.StreamFiles, oldest)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if sub.Gap == nil || sub.Gap.Requested != oldest || sub.Gap.ResumeFrom == "" {
		t.Fatalf("gap=%+v", sub.Gap)
	}
	e := nextEvent(t, sub)
	if sub.Gap.Reset {
		t.Errorf("a trim reads as the stream starting over: %+v", sub.Gap)
	}
	checkResumeFrom(t, s, store.StreamFiles, *sub.Gap, e.ID)
	// Retention keeps at least the configured number of events.
	n := 1
	for len(sub.C) > 0 || n < 10 {
		nextEvent(t, sub)
		n++
	}
	if n < 10 {
		t.Fatalf("retained %d events, want at least 10", n)
	}
}

func TestSubscribe_SlowConsumerIsDropped(t *testing.T) {
	const buffer = 16
	s := open(t, store.Config{SubscriberBuffer: buffer})
	slow, err := s.Subscribe(store.StreamFiles, "")
	if err != nil {
		t.Fatal(err)
	}
	fast, _ := s.Subscribe(store.StreamFiles, "")
	defer fast.Close()
	n := buffer + 10
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			<-fast.C
		}
	}()
	// The writer never waits for the slow subscriber.
	for i := 0; i < n; i += 7 {
		addFiles(t, s, i, min(7, n-i))
	}
	<-done
	waitDropped(t, slow) // dropped while not reading, not when read again
	got := 0
	for range slow.C {
		got++
	}
	if !errors.Is(slow.Err(), store.ErrSlowConsumer) || got != buffer {
		t.Fatalf("slow consumer: err=%v after %d events", slow.Err(), got)
	}
}

func TestSnapshot(t *testing.T) {
	a := storetest.Signer(1)
	s := open(t, store.Config{})
	n := 0
	empty, err := s.Snapshot(ctx, func(store.Event) error { n++; return nil })
	if err != nil || n != 0 {
		t.Fatalf("empty snapshot: %d events, %v", n, err)
	}
	// Whatever id an empty store gives, resuming after it misses nothing.
	if empty != "" {
		sub, err := s.Subscribe(store.StreamMeta, empty)
		if err != nil || sub.Gap != nil {
			t.Fatalf("resume after the empty snapshot: %v %+v", err, sub.Gap)
		}
		sub.Close()
	}
	submit(t, s, a.Text(cidA, "title", "x", 1), a.Text(cidA, "year", "2", 1), a.Text(cidB, "title", "y", 1))
	var keys []string
	id, err := s.Snapshot(ctx, func(e store.Event) error {
		if e.Type != "set" || e.ID != "" {
			t.Fatalf("snapshot event %+v", e)
		}
		keys = append(keys, eventKey(t, e))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// title, year, cids/A of the first record; title, cids/B of the second.
	if len(keys) != 5 || id == "" {
		t.Fatalf("snapshot keys=%v id=%q", keys, id)
	}
	sub, err := s.Subscribe(store.StreamMeta, id)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	submit(t, s, a.Text(cidA, "year", "3", 2))
	if e := nextEvent(t, sub); !strings.HasSuffix(eventKey(t, e), "/year") {
		t.Fatalf("after the snapshot: %s", e.Data)
	}
	stop := errors.New("stop")
	if _, err := s.Snapshot(ctx, func(store.Event) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("callback error: %v", err)
	}
}

// TestSubscribe_StoreClose ends every subscription with ErrClosed.
func TestSubscribe_StoreClose(t *testing.T) {
	tp, cp := paths(t)
	s := reopen(t, store.Config{TruthPath: tp, CachePath: cp})
	addFiles(t, s, 0, 3)
	live, _ := s.Subscribe(store.StreamMeta, "")
	replaying, _ := s.Subscribe(store.StreamFiles, "0") // blocks on its unread backlog? no: 3 < buffer
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range live.C {
	}
	for range replaying.C {
	}
	if !errors.Is(live.Err(), store.ErrClosed) {
		t.Fatalf("live Err=%v", live.Err())
	}
	if _, err := s.Subscribe(store.StreamMeta, ""); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("subscribe after close: %v", err)
	}
	// A clean restart keeps the events: a cursor resumes without a gap.
	s = reopen(t, store.Config{TruthPath: tp, CachePath: cp})
	defer s.Close()
	sub, err := s.Subscribe(store.StreamFiles, "0")
	if err != nil || sub.Gap != nil {
		t.Fatalf("after restart: %v %+v", err, sub.Gap)
	}
	defer sub.Close()
	if got := collect(t, sub, 3); got[0].Type != "add" {
		t.Fatal(got)
	}
}

// TestSnapshot_Paged: a snapshot larger than one page gives every merged
// key once, in order; while a consumer takes its time it holds no read
// transaction (the cache's WAL can be checkpointed in full); a write while
// it runs reaches the subscription that resumes after its id.
func TestSnapshot_Paged(t *testing.T) {
	a := storetest.Signer(1)
	_, cp := paths(t)
	s := open(t, store.Config{CachePath: cp})
	db, err := sql.Open("sqlite", cp)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const n = 1100 // two keys each (title, cids/<cid>): more than one page
	claims := storetest.Claims(n, func(i int) (*store.Signer, store.Claim) {
		return a, store.Claim{CID: storetest.CID(1000 + i), Key: "title", Kind: store.KindText, Value: []byte(fmt.Sprint("t", i)), TS: 1}
	})
	submit(t, s, claims...)
	var keys []string
	id, err := s.Snapshot(ctx, func(e store.Event) error {
		if len(keys) == 0 {
			submit(t, s, a.Text(cidA, "title", "during", 2))
			var busy, log, done int
			if err := db.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &done); err != nil {
				t.Fatal(err)
			}
			if log != done {
				t.Errorf("checkpoint during the snapshot: %d of %d WAL frames (a reader holds an old snapshot)", done, log)
			}
		}
		keys = append(keys, eventKey(t, e))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 2*n || !slices.IsSorted(keys) || len(slices.Compact(slices.Clone(keys))) != len(keys) {
		t.Fatalf("%d keys (want at least %d), sorted %v, or repeated", len(keys), 2*n, slices.IsSorted(keys))
	}
	sub, err := s.Subscribe(store.StreamMeta, id)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	rid := record(t, s, cidA).RID
	if e := nextEvent(t, sub); eventKey(t, e) != "file:"+rid+"/title" && eventKey(t, e) != "file:"+rid+"/cids/"+cidA {
		t.Fatalf("after the snapshot: %s", e.Data)
	}
}
