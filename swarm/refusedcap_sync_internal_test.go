package swarm

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// TestSync_TrustedClaimsPastUntrustedBacklog: a cold list-mode home syncs
// with an open-trust node (a bootstrap) that holds a backlog of strangers'
// claims older than the claims of a signer the home trusts, bigger than the
// home's refused memory plus what one session remembers. The home gets the
// trusted claims in its first session: it stops remembering refusals past
// the per-session share and reads on. (Review 4, R3: ending the session
// there made every session re-read the forgotten head of the backlog and
// end before the trusted claims. Sizes scaled down: the real memory is
// 131,072 and the share a quarter of it. At this size the backlog is one
// store batch, so the old end of the session could not show here; what
// does is the share remembered, and the trusted claims arriving.)
func TestSync_TrustedClaimsPastUntrustedBacklog(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	open := func(i int, mode store.TrustMode) (*Swarm, *store.Store) {
		signer := storetest.Signer(200 + i)
		sk, err := PeerKey(signer)
		if err != nil {
			t.Fatal(err)
		}
		h, err := mn.AddPeer(sk, ma.StringCast(fmt.Sprintf("/ip4/10.2.0.%d/tcp/4001", i)))
		if err != nil {
			t.Fatal(err)
		}
		st := storetest.Open(t, store.Config{OwnUID: signer.UID(), Trust: mode})
		s := New(Config{Identity: signer, Store: st, Host: h, Name: "t", SyncInterval: time.Hour, NoAutoSync: true,
			Logger: storetest.Logger(t, 8)})
		if err := s.Open(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s, st
	}
	boot, bootStore := open(1, store.TrustOpen)
	home, homeStore := open(2, store.TrustList)
	home.refused = newRefusedSet(64)
	home.refusedPerSession = 16

	stranger, _ := store.GenerateSigner()
	friend, _ := store.GenerateSigner()
	ts := uint64(time.Now().UnixMilli()) - 3_600_000
	cid := func(i int) string {
		d := sha256.Sum256(fmt.Append(nil, "backlog ", i))
		return store.MidhashCID(d[:])
	}
	var backlog, mine []store.Claim
	for i := range 200 { // > 64 + 16
		backlog = append(backlog, stranger.Text(cid(i), "title", fmt.Sprint(i), ts+uint64(i)))
	}
	for i := range 5 {
		mine = append(mine, friend.Text(cid(10_000+i), "title", fmt.Sprint(i), ts+10_000+uint64(i)))
	}
	ctx := t.Context()
	if _, err := bootStore.Submit(ctx, append(backlog, mine...), store.SubmitOptions{Origin: store.OriginPeer}); err != nil {
		t.Fatal(err)
	}
	if err := homeStore.Trust(ctx, friend.UID(), "friend"); err != nil {
		t.Fatal(err)
	}
	if _, err := mn.LinkPeers(home.host.ID(), boot.host.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := mn.ConnectPeers(home.host.ID(), boot.host.ID()); err != nil {
		t.Fatal(err)
	}
	st, err := home.SyncWith(ctx, boot.host.ID())
	t.Logf("moved %d, refused %d, new %d, err %v; refused remembered %d", st.ClaimsMoved, st.Refused, st.ClaimsRecvd, err, home.refused.len())
	if err != nil || st.ClaimsRecvd != int64(len(mine)) {
		t.Fatalf("the first session brought %d of the %d claims of a trusted signer (err %v)", st.ClaimsRecvd, len(mine), err)
	}
	if n := home.refused.len(); n > 16 {
		t.Fatalf("one session remembered %d refusals, past its share of 16", n)
	}
}
