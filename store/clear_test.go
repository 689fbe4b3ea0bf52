package store_test

import (
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// snapshotKeys lists the merged keys a consumer holds.
func snapshotKeys(t *testing.T, s *store.Store) []string {
	t.Helper()
	var keys []string
	if _, err := s.Snapshot(ctx, func(e store.Event) error {
		keys = append(keys, eventKey(t, e))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

// TestClear_TellsLiveSubscribers: a clear sends a del for every merged key
// on the meta stream and a reset on the files stream, so connected
// consumers drop what they hold; a cursor from before the clear gets a gap
// that resumes at those events (probe r_api3 F3: they got nothing).
func TestClear_TellsLiveSubscribers(t *testing.T) {
	s := open(t, store.Config{})
	a := storetest.Signer(1)
	submit(t, s, a.Text(cidA, "title", "x", 1), a.Text(cidB, "year", "1", 1))
	addFiles(t, s, 0, 2)
	old, err := s.Subscribe(store.StreamMeta, "0")
	if err != nil {
		t.Fatal(err)
	}
	cursor := nextEvent(t, old).ID
	old.Close()
	want := snapshotKeys(t, s)
	if len(want) < 4 {
		t.Fatalf("snapshot %v: too few keys for the test", want)
	}
	meta, err := s.Subscribe(store.StreamMeta, "")
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Close()
	files, err := s.Subscribe(store.StreamFiles, "")
	if err != nil {
		t.Fatal(err)
	}
	defer files.Close()

	if _, err := s.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	dels := collect(t, meta, len(want))
	var got []string
	for _, e := range dels {
		if e.Type != "del" {
			t.Errorf("meta event %s %s, want del", e.Type, e.Data)
		}
		got = append(got, eventKey(t, e))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("del events for %v, want %v", got, want)
	}
	reset := nextEvent(t, files)
	if reset.Type != "reset" {
		t.Errorf("files event %s %s, want reset", reset.Type, reset.Data)
	}
	if k := snapshotKeys(t, s); len(k) != 0 {
		t.Errorf("keys after clear: %v", k)
	}

	// Reconnecting with a cursor from before: a gap saying the stream
	// started over, resuming just before the dels, and the dels again.
	again, err := s.Subscribe(store.StreamMeta, cursor)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.Gap == nil || !again.Gap.Reset || again.Gap.ResumeFrom >= dels[0].ID {
		t.Fatalf("gap %+v, want a reset resuming before %s", again.Gap, dels[0].ID)
	}
	if e := nextEvent(t, again); e.ID != dels[0].ID {
		t.Errorf("replay starts at %s, want %s", e.ID, dels[0].ID)
	}
	f0, err := s.Subscribe(store.StreamFiles, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer f0.Close()
	if f0.Gap == nil || f0.Gap.ResumeFrom >= reset.ID {
		t.Errorf("files from 0: gap %+v, want one resuming before the reset %s", f0.Gap, reset.ID)
	}
	if e := nextEvent(t, f0); e.ID != reset.ID {
		t.Errorf("files from 0 replays %s %s first, want the reset", e.Type, e.ID)
	}
}

// TestClear_ManyKeysEndLiveStreams: more merged keys than the stream
// retains get no del each; live meta streams end instead, and reconnecting
// gives a gap with an id to resume from, never "".
func TestClear_ManyKeysEndLiveStreams(t *testing.T) {
	s := open(t, store.Config{EventRetention: 10})
	addFiles(t, s, 0, 10) // each file's record has several box-local keys
	meta, err := s.Subscribe(store.StreamMeta, "")
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Close()
	last := ""
	if _, err := s.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	for done := false; !done; {
		select {
		case e, ok := <-meta.C:
			if !ok {
				done = true
			} else {
				last = e.ID
			}
		case <-time.After(20 * time.Second): // only against a hang
			t.Fatal("the live stream did not end")
		}
	}
	if !errors.Is(meta.Err(), store.ErrSlowConsumer) {
		t.Fatalf("live stream ended with %v, want ErrSlowConsumer (reconnect)", meta.Err())
	}
	if last == "" {
		last = "0-1" // a cursor from before the clear
	}
	again, err := s.Subscribe(store.StreamMeta, last)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.Gap == nil || again.Gap.ResumeFrom == "" {
		t.Fatalf("gap %+v, want one with an id to resume from", again.Gap)
	}
	next, err := s.Subscribe(store.StreamMeta, again.Gap.ResumeFrom)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if next.Gap != nil {
		t.Errorf("resuming from %s gives another gap %+v", again.Gap.ResumeFrom, next.Gap)
	}
}

// TestGap_ResumeFromAfterCacheDeleted: after the documented recovery
// (delete cache.db), old cursors and "0" on the files stream get a gap
// whose resumeFrom is a real id, and resuming from it gives no new gap
// (probe r_api3 F3: resumeFrom was "").
func TestGap_ResumeFromAfterCacheDeleted(t *testing.T) {
	tp, cp := paths(t)
	// Event ids are time-based so that cursors compare across a rebuild:
	// that needs a clock that moves, not the tests' fixed one.
	cfg := store.Config{TruthPath: tp, CachePath: cp, Now: time.Now}
	s := reopen(t, cfg)
	a := storetest.Signer(1)
	submit(t, s, a.Text(cidA, "title", "x", 1))
	addFiles(t, s, 0, 1)
	sub, err := s.Subscribe(store.StreamMeta, "0")
	if err != nil {
		t.Fatal(err)
	}
	cursor := nextEvent(t, sub).ID
	sub.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{cp, cp + "-wal", cp + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	s = reopen(t, cfg)
	defer s.Close()
	for _, c := range []struct {
		stream store.Stream
		after  string
	}{{store.StreamMeta, cursor}, {store.StreamFiles, "0"}, {store.StreamFiles, cursor}} {
		sub, err := s.Subscribe(c.stream, c.after)
		if err != nil {
			t.Fatal(err)
		}
		g := sub.Gap
		var first store.Event
		if g != nil && c.stream == store.StreamFiles {
			first = nextEvent(t, sub)
		}
		sub.Close()
		if g == nil || g.ResumeFrom == "" || !g.Reset {
			t.Errorf("%s after %s: gap %+v, want a reset with an id to resume from", c.stream, c.after, g)
			continue
		}
		// The old cache's file list is gone: consumers are told to drop
		// theirs (no delete will come for a file removed meanwhile).
		if c.stream == store.StreamFiles && first.Type != "reset" {
			t.Errorf("files after %s: first event %s %s, want reset", c.after, first.Type, first.Data)
		}
		next, err := s.Subscribe(c.stream, g.ResumeFrom)
		if err != nil {
			t.Fatal(err)
		}
		if next.Gap != nil {
			t.Errorf("%s resuming from %s: another gap %+v", c.stream, g.ResumeFrom, next.Gap)
		}
		next.Close()
	}
}
