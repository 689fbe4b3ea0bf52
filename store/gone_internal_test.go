package store

import (
	"context"
	"errors"
	"maps"
	"testing"
)

// TestGone_RuntimeRebuild: a catch-up rebuild at runtime joins two records
// and writes no per-key event. While it runs, a replay waits for it
// (AwaitRebuild); after it, a consumer that held the old keys and replays
// as the API does after a gap (Gone after its cursor, then a Snapshot)
// holds exactly the cache's keys, without dropping what it held first.
func TestGone_RuntimeRebuild(t *testing.T) {
	ctx := context.Background()
	s := openQuiet(t)
	sg, _ := GenerateSigner()
	c1, c2, c3 := testCID(81), testCID(82), testCID(83)
	if _, err := s.Submit(ctx, []Claim{sg.Text(c1, "title", "one", 1), sg.Text(c2, "year", "2001", 1)}, SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	cursor, err := s.Snapshot(ctx, func(e Event) error { keys[metaKey(t, e)] = true; return nil })
	if err != nil {
		t.Fatal(err)
	}

	entered, release := make(chan struct{}), make(chan struct{})
	s.duringRebuild = func() { close(entered); <-release }
	next := failLinkThenCatchUp(t, s, sg, c1, c2, c3)
	done := make(chan error, 1)
	go func() { done <- next() }()
	<-entered
	short, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.AwaitRebuild(short); !errors.Is(err, context.Canceled) {
		t.Fatalf("AwaitRebuild while the rebuild runs: %v, want it to wait", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s.duringRebuild = nil
	if err := s.AwaitRebuild(ctx); err != nil {
		t.Fatal(err)
	}

	dels := 0
	if err := s.Gone(ctx, cursor, func(e Event) error {
		if e.Type != "del" || e.ID != "" {
			t.Fatalf("gone event %+v", e)
		}
		dels++
		delete(keys, metaKey(t, e))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot(ctx, func(e Event) error { keys[metaKey(t, e)] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if want := cacheMergedKeys(t, s); !maps.Equal(keys, want) || dels == 0 {
		t.Fatalf("after %d dels the consumer holds %v, the cache %v", dels, keys, want)
	}
	// Nothing is gone for a cursor after the rebuild.
	last, _ := s.issuedID(ctx, StreamMeta)
	if err := s.Gone(ctx, last, func(e Event) error { t.Errorf("gone after the newest id: %s", e.Data); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Gone(ctx, "not-an-id", func(Event) error { return nil }); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Gone with a bad cursor: %v", err)
	}
}
