package swarm

import (
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// trustSwarm is a swarm on mn with its own store in the given trust mode
// (storetest signer 700+i, address 10.7.0.i+1); lim replaces the session
// limits when not nil, and opts change the config before Open.
func trustSwarm(t *testing.T, mn mocknet.Mocknet, i int, trust store.TrustMode, lim *sessionLimits, opts ...func(*Config)) *Swarm {
	t.Helper()
	return openMockSwarm(t, mn, 700+i, fmt.Sprintf("/ip4/10.7.0.%d/tcp/4001", i+1), trust, lim, opts...)
}

// TestLookup_HeldVouchAnswerIsNeutral: a fetch answer keeps live vouches
// of trusted signers whatever was asked (they decide whose claims count),
// and a node gossips its own vouches to everyone. A stranger that answers
// every FETCH at once with a copy of a vouch this node already holds must
// not end the lookup as "found": nothing about the cid was stored, and
// the honest peer's slower answer (300 new claims per cid) would be
// cancelled, the remote read a 404. Three cids: the stranger's answer
// usually comes first.
func TestLookup_HeldVouchAnswerIsNeutral(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	// 300 claims to verify and commit under -race on a busy machine.
	v := trustSwarm(t, mn, 10, store.TrustList, nil, func(c *Config) { c.LookupTimeout = 30 * time.Second })
	h := trustSwarm(t, mn, 11, store.TrustOpen, nil)
	vs := v.cfg.Store.(*store.Store)
	own, w, plugin := storetest.Signer(710), storetest.Signer(798), storetest.Signer(797)
	if err := vs.Trust(t.Context(), w.UID(), "home"); err != nil {
		t.Fatal(err)
	}
	ts := uint64(time.Now().UnixMilli()) - 10_000
	ownPeer, err := store.PeerIDCID(own.UID())
	if err != nil {
		t.Fatal(err)
	}
	myVouch := own.Text(ownPeer, "vouch/"+plugin.UID(), "true", ts)
	if _, err := vs.Submit(t.Context(), []store.Claim{myVouch}, store.SubmitOptions{Origin: store.OriginLocal}); err != nil {
		t.Fatal(err)
	}
	xs := []string{storetest.CID(7500), storetest.CID(7501), storetest.CID(7502)}
	var cs []store.Claim
	for _, x := range xs {
		for i := range 300 {
			cs = append(cs, w.Text(x, fmt.Sprintf("k%03d", i), "v", ts+uint64(i)))
		}
	}
	if _, err := h.cfg.Store.Submit(t.Context(), cs, store.SubmitOptions{Origin: store.OriginLocal}); err != nil {
		t.Fatal(err)
	}
	att, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	att.SetStreamHandler(ProtocolFetch, func(st network.Stream) {
		defer st.Close()
		if _, err := newFrameReader(st).next(); err != nil {
			return
		}
		var cf claimsFrame
		cf.add(&myVouch)
		fw := newFrameWriter(st)
		_ = fw.write(cf.bytes())
		_ = fw.write([]byte{frameEnd})
		_ = fw.flush()
	})
	for _, p := range []peer.ID{h.host.ID(), att.ID()} {
		if _, err := mn.LinkPeers(v.host.ID(), p); err != nil {
			t.Fatal(err)
		}
		if _, err := mn.ConnectPeers(v.host.ID(), p); err != nil {
			t.Fatal(err)
		}
	}
	for _, x := range xs {
		n, err := v.Lookup(t.Context(), x)
		if err != nil {
			t.Errorf("lookup %s: %v", x, err)
			continue
		}
		// n may be 0: the sync on connect may have brought the claims first.
		if _, err := vs.Record(t.Context(), x, ""); err != nil {
			t.Errorf("lookup %s reported %d claims found, yet the record is missing: %v", x, n, err)
		}
	}
}

// TestLookup_AlreadyHeldAnswerEndsWhenStoreHoldsCID: an answer of claims
// the store holds already ends the lookup when the store holds the cid
// (another lookup or gossip brought it meanwhile): the lookup is answered,
// not "no peer knows it".
func TestLookup_AlreadyHeldAnswerEndsWhenStoreHoldsCID(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	v := trustSwarm(t, mn, 12, store.TrustOpen, nil)
	h := trustSwarm(t, mn, 13, store.TrustOpen, nil)
	w := storetest.Signer(796)
	x := storetest.CID(7600)
	ts := uint64(time.Now().UnixMilli()) - 10_000
	c := []store.Claim{w.Text(x, "title", "t", ts)}
	for _, s := range []*Swarm{v, h} {
		if _, err := s.cfg.Store.Submit(t.Context(), c, store.SubmitOptions{Origin: store.OriginLocal}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := mn.LinkPeers(v.host.ID(), h.host.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := mn.ConnectPeers(v.host.ID(), h.host.ID()); err != nil {
		t.Fatal(err)
	}
	if n, err := v.Lookup(t.Context(), x); err != nil || n != 0 {
		t.Fatalf("lookup of a cid held already: n=%d err=%v, want 0 and no error", n, err)
	}
}
