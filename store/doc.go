// Package store owns a node's claims: the MMUR2 claim format and its
// signatures, the SQLite truth database (one winning claim per cid, key and
// signer), the derived cache database (the merged view, indexes, event
// streams), and the in-memory reconciliation set the swarm syncs from.
//
// It imports nothing else of this module. One writer goroutine owns every
// SQLite write and commits whatever is queued in one transaction (group
// commit); reads go through a separate connection pool and see committed
// state (WAL). Claim verification runs in parallel on all cores before the
// writer sees a batch.
package store
