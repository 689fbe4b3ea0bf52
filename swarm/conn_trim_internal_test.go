package swarm

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// bareHost is a libp2p host on loopback that speaks none of the swarm's
// protocols by itself: a fresh peer id.
func bareHost(t *testing.T) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableMetrics(), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// TestConnTrim_UsefulPeerOutlastsFreshIDs (review s12 A3): on real
// loopback hosts, a peer that brought the node a claim it lacked (by sync)
// is tagged, and when the node is over its connection limit the trim cuts
// the idle fresh peer ids that connected with it, not that peer, nor a
// protected bootstrap peer. High and low water 1: the trim keeps one
// unprotected peer, the most valued, so without the tag the useful peer
// would be one of 16 equals.
func TestConnTrim_UsefulPeerOutlastsFreshIDs(t *testing.T) {
	boot := bareHost(t)
	signer := storetest.Signer(130)
	st := storetest.Open(t, store.Config{OwnUID: signer.UID(), Trust: store.TrustList})
	w, _ := store.GenerateSigner() // the useful peer's signer, on the trust list
	if err := st.Trust(t.Context(), w.UID(), "friend"); err != nil {
		t.Fatal(err)
	}
	s := New(Config{Identity: signer, Store: st, Name: "t", SyncInterval: time.Hour, NoAutoSync: true,
		Listen:    []string{"/ip4/127.0.0.1/tcp/0"},
		Bootstrap: []string{fmt.Sprintf("%s/p2p/%s", boot.Addrs()[0], boot.ID())},
		MaxConns:  1, Logger: storetest.Logger(t, 8)})
	s.connGrace = 2 * time.Second
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	victim := peer.AddrInfo{ID: s.host.ID(), Addrs: s.host.Addrs()}
	waitConnected := func(p peer.ID, want bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); (s.host.Network().Connectedness(p) == network.Connected) != want; {
			if time.Now().After(deadline) {
				t.Fatalf("peer %s connected: %v, want %v", p, !want, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitConnected(boot.ID(), true)

	// The useful peer pushes one claim the node lacks.
	useful := bareHost(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c := w.Text(store.MidhashCID([]byte("00000000000000000000000000000001")), "title", "x", uint64(time.Now().UnixMilli())-1000)
	pushBySync(ctx, t, useful, victim, c)
	cm := s.host.ConnManager()
	for deadline := time.Now().Add(10 * time.Second); cm.GetTagInfo(useful.ID()) == nil || cm.GetTagInfo(useful.ID()).Tags[usefulTag] != usefulValue; {
		if time.Now().After(deadline) {
			t.Fatalf("the peer that brought a new claim is not tagged: %+v", cm.GetTagInfo(useful.ID()))
		}
		time.Sleep(5 * time.Millisecond)
	}

	// Fresh ids that connect and do nothing.
	const fresh = 15
	idle := make([]host.Host, fresh)
	for i := range idle {
		idle[i] = bareHost(t)
		if err := idle[i].Connect(ctx, victim); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(s.connGrace + 500*time.Millisecond) // all past their grace
	cm.TrimOpenConns(ctx)                          // what the connection manager runs every 10 s over its high water
	for _, h := range idle {
		waitConnected(h.ID(), false)
	}
	if s.host.Network().Connectedness(useful.ID()) != network.Connected {
		t.Fatal("the trim cut the peer that brought a new claim")
	}
	if s.host.Network().Connectedness(boot.ID()) != network.Connected {
		t.Fatal("the trim cut the protected bootstrap peer")
	}
}

// pushBySync connects h to the node and pushes c in one sync session:
// HELLO, CLAIMS, END.
func pushBySync(ctx context.Context, t *testing.T, h host.Host, node peer.AddrInfo, c store.Claim) {
	t.Helper()
	if err := h.Connect(ctx, node); err != nil {
		t.Fatal(err)
	}
	str, err := h.NewStream(ctx, node.ID, ProtocolSync)
	if err != nil {
		t.Fatal(err)
	}
	fw := newFrameWriter(str)
	_ = fw.write(appendHello(nil, hello{version: protoVersion}))
	_ = fw.write(c.AppendWire(binary.AppendUvarint([]byte{frameClaims}, 1)))
	_ = fw.write([]byte{frameEnd})
	if err := fw.flush(); err != nil {
		t.Fatal(err)
	}
	_ = str.CloseWrite()
	_, _ = io.Copy(io.Discard, str)
	_ = str.Close()
}

// TestConnTrim_OpenTrustTagsNobody (review s12 E1): on an open node a
// claim by a key made a moment ago is new too, so it must not buy the
// useful tag: fresh ids would outrank honest peers that only pull.
func TestConnTrim_OpenTrustTagsNobody(t *testing.T) {
	signer := storetest.Signer(132)
	st := storetest.Open(t, store.Config{OwnUID: signer.UID(), Trust: store.TrustOpen})
	s := New(Config{Identity: signer, Store: st, Name: "t", SyncInterval: time.Hour, NoAutoSync: true,
		Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Logger: storetest.Logger(t, 8)})
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	w, _ := store.GenerateSigner()
	c := w.Text(store.MidhashCID([]byte("00000000000000000000000000000002")), "title", "x", uint64(time.Now().UnixMilli())-1000)
	h := bareHost(t)
	pushBySync(ctx, t, h, peer.AddrInfo{ID: s.host.ID(), Addrs: s.host.Addrs()}, c)
	for deadline := time.Now().Add(10 * time.Second); s.Status().ClaimsRecvd == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pushed claim was not received")
		}
	}
	time.Sleep(200 * time.Millisecond) // the session's record tags right after counting
	if ti := s.host.ConnManager().GetTagInfo(h.ID()); ti != nil && ti.Tags[usefulTag] != 0 {
		t.Fatalf("a fresh signer's claim bought the useful tag in open trust: %+v", ti.Tags)
	}
}
