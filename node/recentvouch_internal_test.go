package node

import (
	"slices"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// TestRecentVouches: a write carries the recent vouches of its stored
// claims' signers, besides any it made itself (review 11, R11-2: a batch
// that made a vouch for a second writer dropped the first writer's), and
// never for a refused claim; expired ones are forgotten.
func TestRecentVouches(t *testing.T) {
	n := New(Config{})
	home, w1, w2, w3 := storetest.Signer(960), storetest.Signer(961), storetest.Signer(962), storetest.Signer(963)
	cid, err := store.PeerIDCID(home.UID())
	if err != nil {
		t.Fatal(err)
	}
	vouchFor := func(w *store.Signer) store.Claim { return home.Text(cid, store.VouchPrefix+w.UID(), "true", 1000) }
	v1, v2, v3 := vouchFor(w1), vouchFor(w2), vouchFor(w3)
	n.newVouches[w1.UID()] = newVouch{v1, time.Now()}
	n.newVouches[w2.UID()] = newVouch{v2, time.Now()}
	n.newVouches[w3.UID()] = newVouch{v3, time.Now().Add(-newVouchFor)}
	claims := []store.Claim{w1.Text(storetest.CID(1), "title", "a", 1000), w2.Text(storetest.CID(2), "title", "b", 1000),
		w1.Text(storetest.CID(3), "title", "c", 1000), w3.Text(storetest.CID(4), "title", "d", 1000)}
	stored := []store.Result{{Stored: true}, {Stored: true}, {Stored: true}, {Stored: true}}
	ids := func(cs []store.Claim) []store.ID {
		var out []store.ID
		for _, c := range cs {
			out = append(out, c.ID())
		}
		return out
	}
	if got := n.recentVouches(claims, stored, []store.Claim{v2}); !slices.Equal(ids(got), ids([]store.Claim{v1})) {
		t.Errorf("w1's recent vouch beside the vouch made for w2: got %d vouches", len(got))
	}
	if _, ok := n.newVouches[w3.UID()]; ok {
		t.Error("an expired vouch was kept")
	}
	refused := []store.Result{{}, {Stored: true}, {}, {}}
	if got := n.recentVouches(claims, refused, nil); !slices.Equal(ids(got), ids([]store.Claim{v2})) {
		t.Errorf("w1's claims refused: got %d vouches, want w2's only", len(got))
	}
}
