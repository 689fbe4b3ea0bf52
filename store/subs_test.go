package store_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metanode/metanode/store"
)

// waitDropped waits (bounded; not a timing assertion) until sub is dropped
// as too slow without reading from it.
func waitDropped(t testing.TB, sub *store.Subscription) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); sub.Err() == nil && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(sub.Err(), store.ErrSlowConsumer) {
		t.Fatalf("subscription not dropped as too slow: %v", sub.Err())
	}
}

// wantPaths reads events and checks they are the file events of paths
// f<from> … f<from+n-1>, in order, with increasing ids.
func wantPaths(t testing.TB, sub *store.Subscription, from, n int) []store.Event {
	t.Helper()
	evs := collect(t, sub, n)
	for i, e := range evs {
		if want := fmt.Sprintf("/files/f%06d.mkv", from+i); eventKey(t, e) != want {
			t.Fatalf("event %d is %s, want %s", i, e.Data, want)
		}
		if i > 0 && e.ID <= evs[i-1].ID {
			t.Fatalf("ids not increasing: %s after %s", e.ID, evs[i-1].ID)
		}
	}
	return evs
}

// TestSubscribe_BigCommit: one commit with more events than a channel
// holds (10k file events, about 40k meta events) does not drop live
// subscribers that read normally: they get every event in order, also
// of commits made while they are behind, and are live again after.
func TestSubscribe_BigCommit(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := open(t, store.Config{Registerer: reg})
	files, err := s.Subscribe(store.StreamFiles, "")
	if err != nil {
		t.Fatal(err)
	}
	defer files.Close()
	meta, err := s.Subscribe(store.StreamMeta, "")
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Close()

	// 10k files: 10k file events and about 40k meta events in one commit.
	// Under -race 1,200 files still put about 5k meta events (more than a
	// channel holds) in one commit.
	big := 10_000
	if raceEnabled {
		big = 1_200
	}
	addFiles(t, s, 0, big) // answered after publishing: nobody has read yet
	addFiles(t, s, big, 100)
	wantPaths(t, files, 0, big+100)

	newest, err := s.Snapshot(ctx, func(store.Event) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	var got []store.Event
	for len(got) == 0 || got[len(got)-1].ID != newest {
		e := nextEvent(t, meta)
		if len(got) > 0 && e.ID <= got[len(got)-1].ID {
			t.Fatalf("meta ids not increasing: %s after %s", e.ID, got[len(got)-1].ID)
		}
		got = append(got, e)
	}
	if len(got) < 3*big {
		t.Fatalf("%d meta events for %d new records", len(got), big+100)
	}
	// Exactly what the stream holds: a replay from the start agrees.
	all, err := s.Subscribe(store.StreamMeta, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	for i, e := range collect(t, all, len(got)) {
		if e.ID != got[i].ID {
			t.Fatalf("live event %d is %s, replay has %s", i, got[i].ID, e.ID)
		}
	}

	// Both are live again: a later commit arrives.
	addFiles(t, s, big+100, 1)
	wantPaths(t, files, big+100, 1)
	if nextEvent(t, meta).ID <= newest {
		t.Fatal("old meta event after catching up")
	}
	if files.Err() != nil || meta.Err() != nil {
		t.Fatalf("errs: %v %v", files.Err(), meta.Err())
	}
	// The meta subscriber was fed from the cache (more than a channel's worth).
	if got := metricValue(t, reg, "metanode_store_subscriber_fallbacks_total", string(store.StreamMeta)); got < 1 {
		t.Fatalf("meta fallbacks=%v", got)
	}
}

// TestSubscribe_StalledResumesGapFree: a subscriber that stops reading is
// dropped once it lags by more than SubscriberBuffer events, keeps what it
// was given, and resumes from its last id without a gap.
func TestSubscribe_StalledResumesGapFree(t *testing.T) {
	const bound = 50
	s := open(t, store.Config{SubscriberBuffer: bound})
	stalled, err := s.Subscribe(store.StreamFiles, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	for i := range 5 {
		addFiles(t, s, i*bound, bound)
	}
	waitDropped(t, stalled)
	kept, last := drainInOrder(t, stalled)
	if kept != bound {
		t.Fatalf("kept %d events, want %d", kept, bound)
	}
	resumed, err := s.Subscribe(store.StreamFiles, last)
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	if resumed.Gap != nil {
		t.Fatalf("gap within retention: %+v", resumed.Gap)
	}
	wantPaths(t, resumed, bound, 4*bound)
}

// TestSubscribe_TrimmedPumpIsDropped: a replaying subscriber that stops
// reading is dropped as soon as the events after the page it holds are
// trimmed (not only when it reads again), and a resume reports the gap.
func TestSubscribe_TrimmedPumpIsDropped(t *testing.T) {
	s := open(t, store.Config{SubscriberBuffer: 16, EventRetention: 100})
	addFiles(t, s, 0, 50)
	replay, err := s.Subscribe(store.StreamFiles, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Close()
	for i := range 6 {
		addFiles(t, s, 50+i*50, 50)
	}
	waitDropped(t, replay)
	got, last := drainInOrder(t, replay)
	if got < 16 || got > 50 {
		t.Fatalf("got %d events before the drop", got)
	}
	resumed, err := s.Subscribe(store.StreamFiles, last)
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	if resumed.Gap == nil || resumed.Gap.ResumeFrom == "" {
		t.Fatalf("no gap after a trim: %+v", resumed.Gap)
	}
	first := nextEvent(t, resumed)
	checkResumeFrom(t, s, store.StreamFiles, *resumed.Gap, first.ID)
}

// checkResumeFrom: a gap's resumeFrom lies before the first event replayed
// after it (first), and a consumer that saved it before that event arrived
// gets that event next, with no second gap.
func checkResumeFrom(t *testing.T, s *store.Store, st store.Stream, g store.Gap, first string) {
	t.Helper()
	if g.ResumeFrom >= first {
		t.Fatalf("replay starts at %s, gap resumes from %s: a consumer saving it would skip that event", first, g.ResumeFrom)
	}
	again, err := s.Subscribe(st, g.ResumeFrom)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.Gap != nil {
		t.Fatalf("resuming from %s: another gap %+v", g.ResumeFrom, again.Gap)
	}
	if e := nextEvent(t, again); e.ID != first {
		t.Fatalf("resuming from %s starts at %s, want %s", g.ResumeFrom, e.ID, first)
	}
}

// drainInOrder reads what a dropped subscription still holds: file events
// for f000000, f000001, … in order. It returns their count and the last id.
func drainInOrder(t *testing.T, sub *store.Subscription) (n int, last string) {
	t.Helper()
	for e := range sub.C {
		if want := fmt.Sprintf("/files/f%06d.mkv", n); eventKey(t, e) != want {
			t.Fatalf("event %d is %s, want %s", n, e.Data, want)
		}
		n, last = n+1, e.ID
	}
	return n, last
}
