// Package node wires one metanode together: it loads the node's identity,
// opens the claims engine (store), the swarm, the file watcher and the local
// HTTP API in that order, and closes them in reverse. It implements api.Node:
// local writes (auto-trust and vouching for local signers, then store, then
// publish), remote lookups, file registration, swarm status and trust.
//
// Only cmd/metanode imports this package. It imports api, swarm, store and
// node/watcher; none of them import it.
//
// It also keeps the trust list and the node's own vouch claims in agreement
// (trustsync.go): after a restored backup or an interrupted trust command,
// the newer of the two wins.
//
// Concurrency: New does no I/O. Open starts the components, then one goroutine
// of its own that forwards the store's trust changes to the swarm (a re-sync)
// and reconciles the trust list with the node's vouches on those changes and
// every 30 s. Close cancels it, waits, and closes the components in reverse
// order. Trust commands, auto-trust of local writers, the trust changes of
// pairing (both sides) and that check are serialised by one mutex (trustMu),
// held across a store call and a vouch. The api.Node methods are safe for
// concurrent use (each request runs on its own net/http goroutine); they
// share no node state beyond the components, which are safe for concurrent
// use themselves.
package node
