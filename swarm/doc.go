// Package swarm shares a node's signed claims with other nodes over libp2p:
// GossipSub for live propagation, a range-based set reconciliation protocol
// for catch-up (fingerprints, id lists, and rateless IBLT sketches for
// ranges with scattered differences), a fetch protocol and the Kademlia DHT for lookups, mDNS for
// LAN discovery, and an optional pre-shared key for private swarms.
//
// Only claims in MMUR2 wire form leave the node. It reaches the claims
// engine only through the Store interface and never imports the api (nor
// node or cmd).
//
// Concurrency: Open starts the swarm's loops on its own context, each
// tracked by one WaitGroup: the gossip publisher (batches local claims),
// the gossip reader and a few store workers (verified gossip → Store), the
// topic-events watcher (hands each peer that joins the topic to the
// scheduler, for the sync 2 s after a join), the
// sync scheduler (owns the sync sessions it starts, at most a few at a
// time), the DHT provider (rate-bounded), the bootstrap redialer, the
// connector (redials of LAN peers that dropped; mDNS peers dialed at most
// 4 at a time on goroutines it waits for) and the kicker it starts, which
// disconnects blocked peers at once, never behind a dial. Lookups ask
// providers and connected peers on a few goroutines each waits for.
// libp2p runs the stream handlers
// (inbound sync sessions, bounded in all, per peer and in time, see
// guard.go, and the claims sync sends a peer and its public network,
// sync_budget.go; fetch and pair requests, bounded in time and read with
// small buffers) and the topic validator on its own goroutines; new
// connections are kept from the connection manager's trims for 20 s, and
// peers that brought trusted claims are tagged to outlast idle ones
// (host.go);
// Close waits for the handlers too. The validator submits to the Store
// itself only for a message that carries a vouch for a signer of the same
// message (one synchronous commit), and reads it (one batched query) to
// skip claims it holds a newer row for; other verified gossip goes through
// the store workers, which hand the claims of an ignored message that the
// store took as new back to the publisher. Close cancels the context, waits for
// every loop, then closes the DHT, pubsub and the host it built, in that
// order. Shared state (penalties, refused claims, per-peer figures) sits
// behind small mutexes; nothing holds a lock across I/O.
//
// Lock order: the Swarm's own mu comes first. Only Open and Close take it,
// and they hold it throughout (it serialises them, I/O included); under it
// Close, and an Open that fails, take hmu (the handler count), and Open
// takes the penalty box's and the peer figures' mutexes for the peers
// already connected. No two other locks of this package are ever held
// together.
package swarm
