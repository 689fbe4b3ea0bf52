package swarm_test

import (
	"context"
	"crypto/sha256"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	gocid "github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	dhtpb "github.com/libp2p/go-libp2p-kad-dht/pb"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	mh "github.com/multiformats/go-multihash"

	"github.com/metanode/metanode/store"
)

// TestLookup_PoisonedProvidersDoNotDeny: any peer can store a provider
// record for itself with whatever addresses it likes. Records of 8
// strangers pointing at an address that accepts TCP and says nothing do
// not make a lookup fail of a cid a connected peer holds: providers are
// dialed concurrently with a short budget each, connected ones are asked
// at once, and part of the budget is kept for the connected peers.
// (Review 3, D9: the lookup dialed providers one at a time with the full
// dial and its retries, and answered "no peer knows".)
func TestLookup_PoisonedProvidersDoNotDeny(t *testing.T) {
	// No sync: it would bring the holder's claims before the lookups.
	victim := newNode(t, nodeOpt{trust: store.TrustList, swarm: noAutoSync})
	holder := newNode(t, nodeOpt{swarm: noAutoSync})
	w, _ := store.GenerateSigner()
	holder.submit(t, signMany(w, 0, 5, uint64(time.Now().UnixMilli())-1000))
	if err := victim.st.Trust(context.Background(), w.UID(), ""); err != nil {
		t.Fatal(err)
	}
	connect(t, victim, holder)

	// A TCP address that accepts and then says nothing.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	var held []net.Conn
	var mu sync.Mutex
	conns.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		conns.Wait()
		mu.Lock()
		for _, c := range held {
			_ = c.Close()
		}
		mu.Unlock()
	})
	silent := ma.StringCast("/ip4/127.0.0.1/tcp/" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))

	// Strangers (8 peer ids) announce themselves as providers of the
	// targets at that address, then leave. The holder has provided its
	// cids too (its provider walk runs at start).
	targets := []string{testCID(0), testCID(1), testCID(3), testCID(4)}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var gone []peer.ID
	for range 8 {
		att, err := libp2p.New(libp2p.NoListenAddrs, libp2p.DisableMetrics())
		if err != nil {
			t.Fatal(err)
		}
		if err := att.Connect(ctx, peer.AddrInfo{ID: victim.id, Addrs: victim.sw.Host().Addrs()}); err != nil {
			t.Fatal(err)
		}
		ad, err := dht.New(att, dht.Mode(dht.ModeClient), dht.ProtocolPrefix("/metanode"), dht.DisableValues())
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range targets {
			sum := sha256.Sum256([]byte("metanode/cid/2:test/" + target))
			m, _ := mh.Encode(sum[:], mh.SHA2_256)
			msg := dhtpb.NewMessage(dhtpb.Message_ADD_PROVIDER, gocid.NewCidV1(gocid.Raw, m).Hash(), 0)
			msg.ProviderPeers = dhtpb.RawPeerInfosToPBPeers([]peer.AddrInfo{{ID: att.ID(), Addrs: []ma.Multiaddr{silent}}})
			if err := ad.MessageSender().SendMessage(ctx, victim.id, msg); err != nil {
				t.Fatal(err)
			}
		}
		_ = ad.Close()
		_ = att.Close()
		gone = append(gone, att.ID())
	}
	waitFor(t, 10*time.Second, "the strangers to be gone", func() bool {
		for _, p := range gone {
			if len(victim.sw.Host().Network().ConnsToPeer(p)) > 0 {
				return false
			}
		}
		return true
	})
	waitFor(t, 10*time.Second, "the victim's DHT routing table", func() bool { return victim.sw.Status().RoutingTable > 0 })

	// Control: another cid the holder has, no poisoned record.
	start := time.Now()
	if n, err := victim.sw.Lookup(context.Background(), testCID(2)); err != nil || n == 0 {
		t.Fatalf("control lookup: %d, %v", n, err)
	}
	t.Logf("control lookup (no poisoned record) took %v", time.Since(start).Round(10*time.Millisecond))
	failed := 0
	for _, target := range targets {
		start = time.Now()
		n, err := victim.sw.Lookup(context.Background(), target)
		t.Logf("lookup of %s (held by a connected peer, 8 poisoned provider records): %d claims, err %v, after %v", target, n, err, time.Since(start).Round(10*time.Millisecond))
		if err != nil {
			failed++
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d lookups of cids a connected peer holds failed because strangers announced themselves as providers at an address that accepts TCP and says nothing", failed, len(targets))
	}
}
