package store_test

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// waitForKey reads events until one's key has suffix, failing if the
// subscription ends first.
func waitForKey(t *testing.T, sub *store.Subscription, suffix string) {
	t.Helper()
	for {
		if e := nextEvent(t, sub); strings.HasSuffix(eventKey(t, e), suffix) {
			return
		}
	}
}

// TestCursor_NewerThanStreamGetsGap: a resume cursor newer than anything
// the stream has issued is not one of its ids (a deleted cache restarted
// with the clock behind the old ids, or any id from elsewhere). It gets a
// Gap and the retained events, instead of being taken as "already sent"
// and silently skipping every new event up to it.
func TestCursor_NewerThanStreamGetsGap(t *testing.T) {
	t.Run("DeletedCacheClockBehind", func(t *testing.T) {
		tp, cp := paths(t)
		base := int64(1_800_000_000_000)
		now := base + 60_000
		cfg := store.Config{TruthPath: tp, CachePath: cp, Now: func() time.Time { return time.UnixMilli(now) }}
		s := reopen(t, cfg)
		sg := storetest.Signer(0)
		for i := range 5 {
			submit(t, s, sg.Text(storetest.CID(800+i), "title", fmt.Sprint("old ", i), 1))
		}
		sub, err := s.Subscribe(store.StreamMeta, "0")
		if err != nil {
			t.Fatal(err)
		}
		var last string
		for range 10 { // 5 records × (cids/ + title)
			last = nextEvent(t, sub).ID
		}
		sub.Close()
		s.Close()
		for _, suf := range []string{"", "-wal", "-shm"} {
			_ = os.Remove(cp + suf)
		}
		now = base // a minute behind the old ids
		s = reopen(t, cfg)
		defer s.Close()
		submit(t, s, sg.Text(storetest.CID(900), "title", "new", 2))
		rid, err := s.Resolve(ctx, storetest.CID(900))
		if err != nil {
			t.Fatal(err)
		}
		sub, err = s.Subscribe(store.StreamMeta, last)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		if sub.Gap == nil || sub.Gap.Requested != last || sub.Gap.Reason == "" {
			t.Fatalf("resuming after %s, an id of the deleted cache: gap %+v", last, sub.Gap)
		}
		waitForKey(t, sub, rid+"/title")
	})
	t.Run("FutureID", func(t *testing.T) {
		s := open(t, store.Config{})
		sg := storetest.Signer(0)
		submit(t, s, sg.Text(storetest.CID(1), "title", "one", 1))
		rid, _ := s.Resolve(ctx, storetest.CID(1))
		for _, st := range []store.Stream{store.StreamMeta, store.StreamFiles} {
			sub, err := s.Subscribe(st, "9999999999999-0")
			if err != nil {
				t.Fatal(err)
			}
			if sub.Gap == nil || sub.Gap.ResumeFrom == "" {
				t.Fatalf("%s: a cursor past anything issued: gap %+v", st, sub.Gap)
			}
			if st == store.StreamMeta {
				waitForKey(t, sub, rid+"/title") // replayed from what is retained
			}
			resumed, err := s.Subscribe(st, sub.Gap.ResumeFrom)
			if err != nil || resumed.Gap != nil {
				t.Fatalf("%s: resuming from the gap's ResumeFrom %s: %+v, %v", st, sub.Gap.ResumeFrom, resumed.Gap, err)
			}
			resumed.Close()
			sub.Close()
		}
	})
}

// TestCursor_IssuedIDsGetNoGap: cursors the stream issued keep resuming
// exactly: "0" on an empty stream, the newest id, and the id a Snapshot
// returns while writers commit (it may be committed and not yet published
// to the hub when the consumer subscribes after it).
func TestCursor_IssuedIDsGetNoGap(t *testing.T) {
	s := open(t, store.Config{})
	// A new store's meta stream starts with the boot rebuild's marker (a
	// documented gap); its files stream has nothing at all.
	for _, c := range []string{"0", "0-0"} {
		sub, err := s.Subscribe(store.StreamFiles, c)
		if err != nil || sub.Gap != nil {
			t.Fatalf("%q on an empty stream: %+v, %v", c, sub.Gap, err)
		}
		sub.Close()
	}
	sg := storetest.Signer(0)
	submit(t, s, sg.Text(storetest.CID(1), "title", "one", 1))
	newest, err := s.Snapshot(ctx, func(store.Event) error { return nil })
	if err != nil || newest == "" {
		t.Fatalf("snapshot id %q, %v", newest, err)
	}
	sub, err := s.Subscribe(store.StreamMeta, newest)
	if err != nil || sub.Gap != nil {
		t.Fatalf("the newest id: %+v, %v", sub.Gap, err)
	}
	submit(t, s, sg.Text(storetest.CID(2), "title", "two", 1))
	rid, _ := s.Resolve(ctx, storetest.CID(2))
	if e := nextEvent(t, sub); !strings.HasPrefix(eventKey(t, e), "file:"+rid+"/") {
		t.Fatalf("after the newest id came %s", e.Data)
	}
	sub.Close()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.Submit(ctx, []store.Claim{sg.Text(storetest.CID(10+i%40), "title", fmt.Sprint("v", i), uint64(2+i))}, store.SubmitOptions{}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()
	rounds := 300
	if raceEnabled {
		rounds = 100
	}
	for i := range rounds {
		id, err := s.Snapshot(ctx, func(store.Event) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		sub, err := s.Subscribe(store.StreamMeta, id)
		if err != nil {
			t.Fatal(err)
		}
		gap := sub.Gap
		sub.Close()
		if gap != nil {
			t.Fatalf("round %d: subscribing after the snapshot's id %s: %+v", i, id, gap)
		}
	}
}
