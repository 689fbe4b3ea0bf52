package swarm

import (
	"time"

	lru "github.com/hashicorp/golang-lru/simplelru"
)

// kad-dht keeps the provider sets of the 256 keys last looked up in an LRU
// cache and adds every ADD_PROVIDER for such a key to the cached set
// before our bounded datastore (boundedProviders) has a say: the set of a
// key that stays hot grows with every provider id that announces it, for
// as long as it stays hot. providerCache lets an entry live
// providerCacheTTL at most; the next lookup reloads it from the
// datastore, which holds only what its bounds admitted.
const (
	providerCacheKeys = 256 // kad-dht's own size
	providerCacheTTL  = 10 * time.Minute
)

// providerCache is an LRU whose entries expire. Like the LRU it replaces,
// it is used under kad-dht's provider-manager lock: no lock of its own.
type providerCache struct {
	lru.LRUCache
	ttl time.Duration
	now func() time.Time
}

type aged struct {
	v  any
	at time.Time
}

func newProviderCache(size int, ttl time.Duration) *providerCache {
	c, err := lru.NewLRU(size, nil)
	if err != nil {
		panic(err) // only for a size < 1
	}
	return &providerCache{LRUCache: c, ttl: ttl, now: time.Now}
}

func (c *providerCache) Add(key, value any) bool {
	return c.LRUCache.Add(key, aged{value, c.now()})
}

// Get returns a live entry; an expired one is removed.
func (c *providerCache) Get(key any) (any, bool) {
	v, ok := c.LRUCache.Get(key)
	if !ok {
		return nil, false
	}
	if e := v.(aged); c.now().Sub(e.at) < c.ttl {
		return e.v, true
	}
	c.LRUCache.Remove(key)
	return nil, false
}

func (c *providerCache) Peek(key any) (any, bool) {
	v, ok := c.LRUCache.Peek(key)
	if !ok || c.now().Sub(v.(aged).at) >= c.ttl {
		return nil, false
	}
	return v.(aged).v, true
}

func (c *providerCache) Contains(key any) bool {
	_, ok := c.Peek(key)
	return ok
}

func (c *providerCache) RemoveOldest() (any, any, bool) {
	k, v, ok := c.LRUCache.RemoveOldest()
	if !ok {
		return nil, nil, false
	}
	return k, v.(aged).v, true
}

func (c *providerCache) GetOldest() (any, any, bool) {
	k, v, ok := c.LRUCache.GetOldest()
	if !ok {
		return nil, nil, false
	}
	return k, v.(aged).v, true
}
