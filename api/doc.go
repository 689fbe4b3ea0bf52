// Package api serves the local HTTP/SSE surface that a home's services use
// (http-api.md): record reads, signed-claim writes, event streams, files,
// scratch keys, swarm and trust endpoints, and Prometheus metrics.
//
// It talks to the rest of the node only through the Store and Node
// interfaces declared here, and never imports the swarm. Each request runs on
// its own net/http goroutine; an SSE stream holds one store subscription and
// ends when the client goes, the subscriber is dropped as too slow, or the
// server closes.
package api
