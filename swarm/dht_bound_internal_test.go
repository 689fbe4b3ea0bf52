package swarm

import (
	"context"
	"fmt"
	"testing"
	"time"

	ds "github.com/ipfs/go-datastore"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	dhtpb "github.com/libp2p/go-libp2p-kad-dht/pb"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// dhtFlooder is a bare mocknet host with a kad-dht client, connected to
// target, that sends ADD_PROVIDER for itself.
type dhtFlooder struct {
	h host.Host
	d *dht.IpfsDHT
}

func newDHTFlooder(t *testing.T, mn mocknet.Mocknet, target peer.ID) *dhtFlooder {
	t.Helper()
	h, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mn.LinkPeers(h.ID(), target); err != nil {
		t.Fatal(err)
	}
	if _, err := mn.ConnectPeers(h.ID(), target); err != nil {
		t.Fatal(err)
	}
	d, err := dht.New(h, dht.Mode(dht.ModeClient), dht.ProtocolPrefix(dhtPrefix), dht.DisableValues())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return &dhtFlooder{h: h, d: d}
}

// junkKey is the provider key of the i-th junk cid of flooder tag.
func junkKey(tag string, i int) []byte {
	return provideKey("t", fmt.Sprintf("junk-%s-%d", tag, i)).Hash()
}

// flood announces the flooder as provider of n junk keys at the server
// target runs, and waits until target has handled the last one (the
// manager shows its unflushed writes too, and one stream is handled in
// order, so every earlier one was handled before).
func (f *dhtFlooder) flood(ctx context.Context, t *testing.T, target *dht.IpfsDHT, tag string, n int) {
	t.Helper()
	self := []peer.AddrInfo{{ID: f.h.ID(), Addrs: f.h.Addrs()}}
	for i := range n {
		m := dhtpb.NewMessage(dhtpb.Message_ADD_PROVIDER, junkKey(tag, i), 0)
		m.ProviderPeers = dhtpb.RawPeerInfosToPBPeers(self)
		if err := f.d.MessageSender().SendMessage(ctx, target.Host().ID(), m); err != nil {
			t.Fatalf("ADD_PROVIDER %d: %v", i, err)
		}
	}
	waitUntil(t, 30*time.Second, "the server to handle the last ADD_PROVIDER", func() bool {
		return holds(ctx, t, target, junkKey(tag, n-1), f.h.ID())
	})
}

// holds reports whether d keeps p as a provider of key.
func holds(ctx context.Context, t *testing.T, d *dht.IpfsDHT, key []byte, p peer.ID) bool {
	t.Helper()
	provs, err := d.ProviderStore().GetProviders(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range provs {
		if ai.ID == p {
			return true
		}
	}
	return false
}

// TestDHT_ProviderRecordsPerPeerBounded: a swarm's DHT server keeps at most
// maxProviderRecordsPerPeer provider records from one peer, however many
// keys it announces itself for. (Review 3, D6: kad-dht's default in-memory
// store kept all of them, 48 h each, ~280 B of heap per record.) The
// manager buffers up to 256 writes in memory before its datastore sees
// them, so the keys sampled past the bound are ones flushed since.
func TestDHT_ProviderRecordsPerPeerBounded(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	signer := storetest.Signer(301)
	sk, err := PeerKey(signer)
	if err != nil {
		t.Fatal(err)
	}
	h, err := mn.AddPeer(sk, ma.StringCast("/ip4/10.3.0.1/tcp/4001"))
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Identity: signer, Store: storetest.Open(t, store.Config{OwnUID: signer.UID()}), Host: h,
		Name: "t", SyncInterval: time.Hour, DHTServer: true, NoAutoSync: true, Logger: storetest.Logger(t, 8)})
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	f := newDHTFlooder(t, mn, h.ID())
	const n = maxProviderRecordsPerPeer + 600
	f.flood(ctx, t, s.dht, "a", n)
	first := holds(ctx, t, s.dht, junkKey("a", 0), f.h.ID())
	past := 0
	for _, i := range []int{maxProviderRecordsPerPeer, maxProviderRecordsPerPeer + 100, maxProviderRecordsPerPeer + 200} {
		if holds(ctx, t, s.dht, junkKey("a", i), f.h.ID()) {
			past++
		}
	}
	t.Logf("one peer announced itself for %d keys: first held %v, %d of 3 sampled past the bound of %d held",
		n, first, past, maxProviderRecordsPerPeer)
	if !first {
		t.Fatal("the first record of a peer was not kept")
	}
	if past > 0 {
		t.Fatalf("one peer made the node keep provider records past the per-peer bound of %d", maxProviderRecordsPerPeer)
	}
}

// TestDHT_BoundedProvidersTotal: under kad-dht's real provider manager,
// the provider datastore keeps at most its total bound across peers and
// its per-peer bound from each; once full, a peer holding less takes room
// from the biggest holder until they hold about the same; a refreshed
// record still goes through, deletes (expiry) free room, and the node's
// own records are not counted.
func TestDHT_BoundedProvidersTotal(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	server, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	b := newBoundedProviders(server.ID(), 1000, 400, storetest.Logger(t, 8))
	d, err := dht.New(server, dht.Mode(dht.ModeServer), dht.ProtocolPrefix(dhtPrefix), dht.DisableValues(),
		dht.ProviderDatastore(b))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var flooders []*dhtFlooder
	for i, tag := range []string{"a", "b", "c"} {
		f := newDHTFlooder(t, mn, server.ID())
		flooders = append(flooders, f)
		f.flood(ctx, t, d, tag, 600) // all but the last few reach the datastore (flushes of 256)
		total, mine := b.counts(f.h.ID())
		t.Logf("after peer %d: %d records in all, %d of its own", i, total, mine)
		// The third finds the table full after 200 and takes room from
		// the two that filled it, down to an even share (1000 / 3).
		if want := []int{400, 400, 333}[i]; mine < want || mine > want+1 {
			t.Fatalf("peer %d: %d of its records kept, want %d (bounds 400 per peer, 1000 in all)", i, mine, want)
		}
	}
	if total, _ := b.counts(""); total != 1000 {
		t.Fatalf("%d records in all, want the bound 1000", total)
	}
	for _, f := range flooders {
		if _, n := b.counts(f.h.ID()); n < 332 || n > 334 {
			t.Fatalf("a full table is not shared: %d records of %s", n, f.h.ID())
		}
	}
	key := func(tag string, i int, p peer.ID) ds.Key {
		return ds.NewKey("/providers/" + b32.EncodeToString(junkKey(tag, i)) + "/" + b32.EncodeToString([]byte(p)))
	}
	// Which of c's records were dropped depends on the order of the
	// manager's batches: the first 500 were all flushed (the last few
	// writes may still be buffered, and the manager shows those).
	c := flooders[2].h.ID()
	kept, dropped := -1, -1
	for i := range 500 {
		if ok, _ := b.Has(ctx, key("c", i, c)); ok && kept < 0 {
			kept = i
		} else if !ok && dropped < 0 {
			dropped = i
		}
	}
	if kept < 0 || dropped < 0 || !holds(ctx, t, d, junkKey("c", kept), c) || holds(ctx, t, d, junkKey("c", dropped), c) {
		t.Fatalf("the provider manager does not show what its datastore holds (kept %d, dropped %d)", kept, dropped)
	}

	// Directly: a refresh goes through, a delete frees room, own records are free.
	a := flooders[0].h.ID()
	held := 0
	for ok, _ := b.Has(ctx, key("a", held, a)); !ok && held < 600; ok, _ = b.Has(ctx, key("a", held, a)) {
		held++
	}
	if err := b.Put(ctx, key("a", held, a), []byte{1}); err != nil {
		t.Fatal(err)
	}
	if v, err := b.Get(ctx, key("a", held, a)); err != nil || v[0] != 1 {
		t.Fatalf("a refreshed record was not stored: %v %v", v, err)
	}
	if err := b.Put(ctx, key("z", 0, a), []byte{1}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := b.Has(ctx, key("z", 0, a)); ok {
		t.Fatal("a new record past the bounds was stored")
	}
	if err := b.Delete(ctx, key("a", held, a)); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, key("z", 0, a), []byte{1}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := b.Has(ctx, key("z", 0, a)); !ok {
		t.Fatal("a deleted record did not free its room")
	}
	for i := range 10 {
		if err := b.Put(ctx, key("own", i, server.ID()), []byte{1}); err != nil {
			t.Fatal(err)
		}
	}
	if ok, _ := b.Has(ctx, key("own", 9, server.ID())); !ok {
		t.Fatal("the node's own records were bounded")
	}
	if total, _ := b.counts(""); total != 1000 {
		t.Fatalf("%d records counted, want 1000", total)
	}
}

// TestDHT_ProviderTableNotLockedByFirstComers: a few peer ids that filled
// the table (each within its per-peer bound) and keep refreshing it do not
// lock out a new honest provider: its records take the biggest holder's
// room (review 4, R6: 8 throwaway ids held 131,072 records for 48 h).
func TestDHT_ProviderTableNotLockedByFirstComers(t *testing.T) {
	b := newBoundedProviders("self", 64, 16, storetest.Logger(t, 8))
	ctx := t.Context()
	key := func(p string, i int) ds.Key { return ds.NewKey(fmt.Sprintf("/providers/K%s%d/%s", p, i, p)) }
	for _, p := range []string{"A", "B", "C", "D"} {
		for i := range 16 {
			if err := b.Put(ctx, key(p, i), []byte{1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 16 { // refreshes of what they hold still go through
		if err := b.Put(ctx, key("A", i), []byte{2}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		if err := b.Put(ctx, key("H", i), []byte{1}); err != nil {
			t.Fatal(err)
		}
		if ok, _ := b.Has(ctx, key("H", i)); !ok {
			t.Fatalf("an honest provider's record %d was dropped from a table the first comers filled", i)
		}
	}
	b.mu.Lock()
	total, flooder, honest := b.total, b.peers["A"]+b.peers["B"]+b.peers["C"]+b.peers["D"], b.peers["H"]
	b.mu.Unlock()
	if total != 64 || flooder != 59 || honest != 5 {
		t.Fatalf("total %d (want 64), first comers %d (want 59), honest %d (want 5)", total, flooder, honest)
	}
}
