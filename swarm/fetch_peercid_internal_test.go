package swarm

import (
	"testing"
	"time"

	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"github.com/metanode/metanode/store"
)

// TestFetch_LinkOnPeerCIDHidesNothing: a FETCH of two peer-id cids (what an
// interest node asks for first: its trusted signers' vouches) answers both,
// though a stranger wrote a "link" from the first to the second on an
// open-trust server. Links on peer-id cids join no group; the server used
// to mark the link's target as answered and never load it (review 4, R4).
func TestFetch_LinkOnPeerCIDHidesNothing(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	server := mockSwarm(t, mn, 6)
	t1, _ := store.GenerateSigner()
	t2, _ := store.GenerateSigner()
	x, _ := store.GenerateSigner()
	stranger, _ := store.GenerateSigner()
	p1, _ := store.PeerIDCID(t1.UID())
	p2, _ := store.PeerIDCID(t2.UID())
	ts := uint64(time.Now().UnixMilli()) - 1000
	claims := []store.Claim{
		t1.Text(p1, store.VouchPrefix+x.UID(), "true", ts),
		t2.Text(p2, store.VouchPrefix+x.UID(), "true", ts+1),
		stranger.Text(p1, store.LinkPrefix+p2, "true", ts+2),
	}
	res, err := server.cfg.Store.Submit(t.Context(), claims, store.SubmitOptions{Origin: store.OriginPeer})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Outcome == store.Rejected {
			t.Fatalf("setup: claim %d rejected: %v", i, r.Err)
		}
	}
	client := connectedPeer(t, mn, server.host.ID())
	ask := func(cids ...string) map[string]int {
		st, err := client.NewStream(t.Context(), server.host.ID(), ProtocolFetch)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readFetch(t.Context(), st, cids)
		if err != nil {
			t.Fatal(err)
		}
		per := map[string]int{}
		for _, c := range got {
			per[c.CID]++
		}
		return per
	}
	alone, both := ask(p2), ask(p1, p2)
	if alone[p2] != 1 || both[p2] != 1 || both[p1] != 2 {
		t.Fatalf("asked p2 alone: %d claims on p2; asked p1, p2: %d on p1, %d on p2 (want 1; 2 and 1)", alone[p2], both[p1], both[p2])
	}
}
