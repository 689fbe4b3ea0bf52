// Package swarm shares a node's signed claims with other nodes over libp2p:
// GossipSub for live propagation, a range-based set reconciliation protocol
// for catch-up, a fetch protocol and the Kademlia DHT for lookups, mDNS for
// LAN discovery, and an optional pre-shared key for private swarms.
//
// Only claims in MMUR2 wire form leave the node. It reaches the claims
// engine only through the Store interface and never imports the api.
package swarm
