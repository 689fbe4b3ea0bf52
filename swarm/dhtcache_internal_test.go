package swarm

import (
	"context"
	"testing"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p-kad-dht/records"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"github.com/metanode/metanode/store/storetest"
)

// TestDHT_ProviderCacheExpires: kad-dht adds an ADD_PROVIDER for a key
// it has cached (one looked up lately) to the cached set, whatever our
// bounded datastore then keeps; the set of a hot key so grew past every
// bound (review 4, unproven). The cache now lets an entry live
// providerCacheTTL: then the set is reloaded from what the datastore
// admitted.
func TestDHT_ProviderCacheExpires(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	server, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	b := newBoundedProviders(server.ID(), 1000, 400, storetest.Logger(t, 8))
	cache := newProviderCache(providerCacheKeys, providerCacheTTL)
	clock := time.Now()
	cache.now = func() time.Time { return clock }
	d, err := dht.New(server, dht.Mode(dht.ModeServer), dht.ProtocolPrefix(dhtPrefix), dht.DisableValues(),
		dht.ProviderDatastore(b), dht.ProviderManagerOpts(records.Cache(cache)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	honest := newDHTFlooder(t, mn, server.ID())
	honest.flood(ctx, t, d, "k", 1) // the hot key; the wait looks it up, which caches it
	hot := junkKey("k", 0)
	f := newDHTFlooder(t, mn, server.ID())
	f.flood(ctx, t, d, "f", 700) // past its per-peer bound of 400 in the two flushes (of 256) so far
	f.flood(ctx, t, d, "k", 1)   // refused by the datastore, added to the cached set
	f.flood(ctx, t, d, "g", 300) // flushes the buffered writes, the hot key's among them
	if _, n := b.counts(f.h.ID()); n != 400 {
		t.Fatalf("the flooder holds %d records, want its bound 400", n)
	}
	if !holds(ctx, t, d, hot, f.h.ID()) {
		t.Fatal("the cached set did not take the refused provider: kad-dht changed, this test no longer tests anything")
	}
	clock = clock.Add(providerCacheTTL)
	if holds(ctx, t, d, hot, f.h.ID()) {
		t.Fatal("a provider record the datastore refused is still served after the cache's lifetime")
	}
	if !holds(ctx, t, d, hot, honest.h.ID()) {
		t.Fatal("the honest provider of the hot key was lost on reload")
	}
}

func TestProviderCache(t *testing.T) {
	c := newProviderCache(2, time.Minute)
	clock := time.Now()
	c.now = func() time.Time { return clock }
	c.Add("a", 1)
	if v, ok := c.Get("a"); !ok || v != 1 {
		t.Fatalf("Get a = %v %v", v, ok)
	}
	if k, v, ok := c.GetOldest(); !ok || k != "a" || v != 1 {
		t.Fatalf("GetOldest = %v %v %v", k, v, ok)
	}
	clock = clock.Add(time.Minute)
	if _, ok := c.Peek("a"); ok || c.Contains("a") {
		t.Fatal("an expired entry is seen")
	}
	if _, ok := c.Get("a"); ok || c.Len() != 0 {
		t.Fatalf("an expired entry is returned or kept (len %d)", c.Len())
	}
	c.Add("b", 2)
	c.Add("c", 3)
	c.Add("d", 4)
	if k, v, ok := c.RemoveOldest(); !ok || k != "c" || v != 3 {
		t.Fatalf("RemoveOldest = %v %v %v, want c 3 (b evicted by size)", k, v, ok)
	}
}
