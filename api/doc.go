// Package api serves the local HTTP/SSE surface that a home's services use
// (http-api.md): record reads, signed-claim writes, event streams, files,
// scratch keys, swarm and trust endpoints, and Prometheus metrics; and
// api.Client, which every CLI command uses to talk to a node.
//
// Who may use it is decided before routing, in one place: access.go (local
// callers: loopback, the Unix socket, declared networks, the API token),
// guard.go (what a browser may do) and budget.go (request bodies in
// flight); docs/http.md says the rules.
//
// It talks to the rest of the node only through the Store and Node
// interfaces declared here; it imports store for types only and never the
// swarm or the node.
//
// Concurrency: the server loop is one goroutine started by Open and ended by
// Close. Each request runs on its own net/http goroutine; a big claims
// batch is decoded on all cores within its request. An SSE stream holds one
// store subscription and ends when the client goes, the store drops it as
// too slow, a write stays blocked past SSEWriteTimeout, or the server
// closes. Close ends streams first, then drains requests (bounded), then
// cancels what is left and waits for its handlers.
package api
