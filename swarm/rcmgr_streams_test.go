package swarm_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

// One peer may hold only so many inbound streams of one protocol at a
// node (the resource manager's scaled default per protocol and peer, 75
// on an 8-core 24 GB machine): an idle fetch request holds a handler
// until fetchTimeout, and past that limit the node resets the stream at
// once, while another peer's fetch is still served. Real hosts on
// loopback (mocknet has no resource manager).
func TestResourceManager_StreamsPerPeer(t *testing.T) {
	srv := newNode(t, nodeOpt{})
	w, _ := store.GenerateSigner()
	claims := signMany(w, 0, 3, uint64(time.Now().UnixMilli())-1000)
	srv.submit(t, claims)

	var readers sync.WaitGroup
	t.Cleanup(readers.Wait) // after the attacker's Close, which ends them
	att, err := libp2p.New(libp2p.NoListenAddrs, libp2p.ResourceManager(&network.NullResourceManager{}),
		libp2p.DisableMetrics())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = att.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := att.Connect(ctx, peer.AddrInfo{ID: srv.id, Addrs: srv.sw.Host().Addrs()}); err != nil {
		t.Fatal(err)
	}

	// Each stream sends one byte of a frame length and nothing more: the
	// node's fetch handler waits for the rest. A refused stream is reset,
	// so its read fails; a held one blocks.
	const n = 200
	var refused atomic.Int64
	for range n {
		st, err := att.NewStream(ctx, srv.id, swarm.ProtocolFetch)
		if err == nil {
			_, err = st.Write([]byte{5})
		}
		if err != nil {
			refused.Add(1)
			continue
		}
		readers.Go(func() {
			if _, err := st.Read(make([]byte, 1)); err != nil {
				refused.Add(1)
			}
		})
	}
	held := func() int64 {
		var k int64
		for _, c := range srv.sw.Host().Network().ConnsToPeer(att.ID()) {
			for _, st := range c.GetStreams() {
				if st.Protocol() == swarm.ProtocolFetch && st.Stat().Direction == network.DirInbound {
					k++
				}
			}
		}
		return k
	}
	waitFor(t, 20*time.Second, "every stream to be held or refused", func() bool { return held()+refused.Load() == n })
	h := held()
	t.Logf("one peer holds %d idle fetch streams; %d refused", h, n-h)
	if h == n || h == 0 {
		t.Fatalf("%d of %d idle streams held: no per-peer limit in force", h, n)
	}

	friend := newNode(t, nodeOpt{swarm: func(c *swarm.Config) { c.NoAutoSync = true }})
	connect(t, friend, srv)
	fctx, fcancel := context.WithTimeout(context.Background(), 20*time.Second) // its own: ctx is spent by now
	defer fcancel()
	if got, err := friend.sw.FetchFrom(fctx, srv.id, []string{claims[0].CID}); err != nil || got != 1 {
		t.Fatalf("another peer's fetch while one peer holds its streams: %d claims, %v", got, err)
	}
}
