package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/store"
)

// errSeen ends a stream read once the awaited key is set.
var errSeen = errors.New("seen")

// followMeta follows the meta stream from cursor as meta-fuse does (set
// adds a key, del removes it, an event's id is the new cursor, a gap sets
// it to resumeFrom whatever the reason) until key is set; it returns the
// cursor.
func followMeta(t *testing.T, n *node.Node, keys map[string]bool, cursor, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := api.NewClient(n.APIURL())
	defer c.Close()
	err := c.Events(ctx, "meta", cursor, func(ev store.Event) error {
		var d struct{ Key, ResumeFrom string }
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		switch ev.Type {
		case "gap":
			cursor = d.ResumeFrom
			return nil
		case "set":
			keys[d.Key] = true
		case "del":
			delete(keys, d.Key)
		}
		if ev.ID != "" {
			cursor = ev.ID
		}
		if ev.Type == "set" && d.Key == key {
			return errSeen
		}
		return nil
	})
	if !errors.Is(err, errSeen) {
		t.Fatalf("following the meta stream for %s: %v", key, err)
	}
	return cursor
}

func nodeKeys(t *testing.T, n *node.Node) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	if _, err := n.Store().Snapshot(context.Background(), func(ev store.Event) error {
		var d struct{ Key string }
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		keys[d.Key] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestReplay_AfterRebuild: a home in open trust holds records a stranger
// wrote (no auto-trust, so the stranger is on no list); meta-fuse follows
// them. The owner restarts in list trust: the cache is rebuilt and the
// stranger's records are gone, with no per-key event. meta-fuse resumes
// with its cursor, takes the gap and reads on, and ends holding exactly
// the node's keys: a del for each of the stranger's, the rest again.
func TestReplay_AfterRebuild(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t, dataDir(t, "home"))
	cfg.Trust, cfg.NoAutoTrust = store.TrustOpen, true
	n := openNodeNoCleanup(t, cfg)
	stranger, plugin := signer(t), signer(t)
	if err := n.Trust(ctx, plugin.UID()); err != nil {
		t.Fatal(err)
	}
	ts := nowMS()
	if _, err := n.SubmitClaims(ctx, []store.Claim{
		stranger.Text(testCID(1), "title", "Stranger's", ts), stranger.Text(testCID(1), "year", "1999", ts),
		plugin.Text(testCID(2), "title", "Kept", ts), stranger.Text(testCID(2), "rating", "2", ts),
	}); err != nil {
		t.Fatal(err)
	}
	rid2, err := n.Store().Resolve(ctx, testCID(2))
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	cursor := followMeta(t, n, keys, "0-0", "file:"+rid2+"/title")
	if !maps.Equal(keys, nodeKeys(t, n)) || len(keys) < 6 {
		t.Fatalf("before: the follower holds %v", keys)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	cfg.Trust = store.TrustList
	n = openNode(t, cfg)
	if _, err := n.SubmitClaims(ctx, []store.Claim{plugin.Text(testCID(3), "title", "sentinel", ts+1)}); err != nil {
		t.Fatal(err)
	}
	rid3, err := n.Store().Resolve(ctx, testCID(3))
	if err != nil {
		t.Fatal(err)
	}
	followMeta(t, n, keys, cursor, "file:"+rid3+"/title")
	if want := nodeKeys(t, n); !maps.Equal(keys, want) {
		t.Fatalf("after the rebuild the follower holds %v, the node %v", keys, want)
	}
	if keys["file:"+rid2+"/rating"] {
		t.Fatal("the stranger's rating is still held")
	}
}
