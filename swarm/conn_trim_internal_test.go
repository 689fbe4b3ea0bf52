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
	st := storetest.Open(t, store.Config{OwnUID: signer.UID(), Trust: store.TrustOpen})
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

	// The useful peer pushes one claim the node lacks: HELLO, CLAIMS, END.
	useful := bareHost(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := useful.Connect(ctx, victim); err != nil {
		t.Fatal(err)
	}
	str, err := useful.NewStream(ctx, victim.ID, ProtocolSync)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := store.GenerateSigner()
	c := w.Text(store.MidhashCID([]byte("00000000000000000000000000000001")), "title", "x", uint64(time.Now().UnixMilli())-1000)
	body := c.AppendWire(binary.AppendUvarint([]byte{frameClaims}, 1))
	fw := newFrameWriter(str)
	_ = fw.write(appendHello(nil, hello{version: protoVersion}))
	_ = fw.write(body)
	_ = fw.write([]byte{frameEnd})
	if err := fw.flush(); err != nil {
		t.Fatal(err)
	}
	_ = str.CloseWrite()
	_, _ = io.Copy(io.Discard, str)
	_ = str.Close()
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
