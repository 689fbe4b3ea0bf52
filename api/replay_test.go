package api_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"testing"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/store"
)

// follower is a meta-stream consumer as meta-fuse's SSE client and state
// builder are: it keeps the keys it was told of (set adds, del removes),
// moves its cursor to each event's id, and on a gap sets it to
// resumeFrom and reads on, whatever the reason.
type follower struct {
	keys   map[string]bool
	cursor string
}

// readUntil follows the meta stream from the follower's cursor until it
// has applied a set of key, and closes it.
func (f *follower) readUntil(t *testing.T, e *env, key string) {
	t.Helper()
	s := e.openStream(t, "meta", f.cursor)
	defer s.close()
	for {
		ev := s.next(t)
		if ev.Type == "gap" {
			var g struct{ ResumeFrom string }
			if err := json.Unmarshal(ev.Data, &g); err != nil {
				t.Fatal(err)
			}
			f.cursor = g.ResumeFrom
			continue
		}
		k := metaOf(t, ev).Key
		switch ev.Type {
		case "set":
			f.keys[k] = true
		case "del":
			delete(f.keys, k)
		}
		if ev.ID != "" {
			f.cursor = ev.ID
		}
		if ev.Type == "set" && k == key {
			return
		}
	}
}

// mergedKeys is what the node holds: every merged key.
func mergedKeys(t *testing.T, e *env) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	if _, err := e.st.Snapshot(context.Background(), func(ev store.Event) error {
		keys[metaOf(t, ev).Key] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

func (e *env) ridOf(t *testing.T, cid string) string {
	t.Helper()
	rec, err := e.c.Meta(context.Background(), cid, api.MetaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rec.RID
}

// sameKeys fails unless the follower holds exactly the node's keys.
func (f *follower) sameKeys(t *testing.T, e *env) {
	t.Helper()
	want := mergedKeys(t, e)
	if !maps.Equal(f.keys, want) {
		var extra, missing []string
		for k := range f.keys {
			if !want[k] {
				extra = append(extra, k)
			}
		}
		for k := range want {
			if !f.keys[k] {
				missing = append(missing, k)
			}
		}
		slices.Sort(extra)
		slices.Sort(missing)
		t.Fatalf("the follower holds %d keys, the node %d: stale %v, missing %v", len(f.keys), len(want), extra, missing)
	}
}

// A follower that was away while its cursor fell past retention, and
// while keys it holds were deleted (their dels trimmed since), ends
// holding exactly the node's keys after the gap: a del for each of them,
// a set for every key.
func TestReplay_PastRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withStore(func(c *store.Config) { c.EventRetention = 4 }))
	e.post(e.text(cidA, "title", "Heat", e.ts(0)), e.text(cidA, "year", "1995", e.ts(0)), e.text(cidB, "title", "Ronin", e.ts(0)))
	f := &follower{keys: map[string]bool{}, cursor: "0-0"}
	f.readUntil(t, e, "file:"+e.ridOf(t, cidB)+"/title")
	f.sameKeys(t, e)

	// Away: a key and a whole record go, then far more events than the
	// stream keeps.
	sg, _ := store.GenerateSigner()
	e.post(e.signer.Retraction(cidA, "year", e.ts(1)), e.signer.Retraction(cidB, "title", e.ts(1)))
	claims := make([]store.Claim, 200)
	for i := range claims {
		claims[i] = sg.Text(cidC, "k"+itoa(i), "v", e.ts(0))
	}
	e.post(claims...)
	e.post(e.text(cidN(1), "title", "sentinel", e.ts(2)))

	f.readUntil(t, e, "file:"+e.ridOf(t, cidN(1))+"/title")
	f.sameKeys(t, e)
}

// A clear of more keys than the stream keeps writes no dels; a follower
// from before it still ends holding exactly what the node holds after.
func TestReplay_AfterLargeClear(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withStore(func(c *store.Config) { c.EventRetention = 4 }))
	claims := make([]store.Claim, 20)
	for i := range claims {
		claims[i] = e.text(cidN(100+i), "title", "t"+itoa(i), e.ts(0))
	}
	e.post(claims...)
	f := &follower{keys: map[string]bool{}, cursor: "0-0"}
	f.readUntil(t, e, "file:"+e.ridOf(t, cidN(119))+"/title")
	if len(f.keys) < 20 {
		t.Fatalf("the follower holds %d keys", len(f.keys))
	}
	if a := e.do(http.MethodPost, "/api/metadata/clear", nil); a.status != http.StatusOK {
		t.Fatalf("clear: %d %s", a.status, a.body)
	}
	e.post(e.text(cidN(1), "title", "after the clear", e.ts(5)))
	f.readUntil(t, e, "file:"+e.ridOf(t, cidN(1))+"/title")
	f.sameKeys(t, e)
}

// A follower cut off in the middle of a replay (after some of its events,
// before the one with an id) reconnects with the gap's resumeFrom and
// gets the whole replay again.
func TestReplay_CutOffResumes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withStore(func(c *store.Config) { c.EventRetention = 4 }))
	e.post(e.text(cidA, "title", "Heat", e.ts(0)))
	f := &follower{keys: map[string]bool{}, cursor: "0-0"}
	f.readUntil(t, e, "file:"+e.ridOf(t, cidA)+"/title")
	claims := make([]store.Claim, 120)
	for i := range claims {
		claims[i] = e.text(cidB, "k"+itoa(i), "v", e.ts(0))
	}
	e.post(claims...)
	s := e.openStream(t, "meta", f.cursor)
	var g struct{ ResumeFrom string }
	if ev := s.next(t); ev.Type != "gap" || json.Unmarshal(ev.Data, &g) != nil {
		t.Fatalf("first frame %+v", ev)
	}
	f.cursor = g.ResumeFrom
	for range 10 { // part of the replay, none with an id
		if ev := s.next(t); ev.ID != "" {
			t.Fatalf("event %d of the replay has an id: %+v", 10, ev)
		}
	}
	s.close()
	e.post(e.text(cidN(2), "title", "sentinel", e.ts(2)))
	f.readUntil(t, e, "file:"+e.ridOf(t, cidN(2))+"/title")
	f.sameKeys(t, e)
}
