// Package store owns a node's claims: the MMUR2 claim format and its
// signatures, the SQLite truth database (one winning claim per cid, key and
// signer, the cid groups, the trust list), the derived cache database (the
// merged view, lookups, search indexes, event streams, local file facts),
// the trust policy, and the in-memory reconciliation set the swarm syncs
// from. docs/store.md explains the design.
//
// It imports nothing else of this module: api, swarm and node depend on
// it, never the reverse.
//
// Concurrency: one writer goroutine owns both write connections and does
// every write; whatever is queued when it wakes up is committed in one
// truth transaction and one cache transaction (group commit), and callers
// get their results after both commits. Claim verification runs in
// parallel on all cores on the caller's goroutine before the writer sees a
// batch. Reads go through separate read-only connection pools and see
// committed state (WAL). Besides the writer, a loader goroutine fills the
// sync set after Open, and each subscription replaying a backlog, or
// fallen behind, has a pump goroutine that reads the event rows until it
// is live again; the writer feeds live subscriptions without ever
// blocking. Close stops them all.
package store
