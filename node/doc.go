// Package node wires one metanode together: it loads the node's identity,
// opens the claims engine (store), the swarm, the file watcher and the local
// HTTP API in that order, and closes them in reverse. It implements api.Node:
// local writes (auto-trust and vouching for local signers, then store, then
// publish), remote lookups, file registration, swarm status and trust.
//
// Only cmd/metanode imports this package. It imports api, swarm, store and
// node/watcher; none of them import it.
//
// Concurrency: New does no I/O. Open starts the components, then one goroutine
// of its own that forwards the store's trust changes to the swarm (a re-sync).
// Close cancels it, waits, and closes the components in reverse order. The
// api.Node methods are safe for concurrent use (each request runs on its own
// net/http goroutine); they share no node state beyond the components, which
// are safe for concurrent use themselves.
package node
