// Package reconcile is metanode's range-based set reconciliation over
// claim items (ts, id), in the manner of negentropy, with rateless IBLT
// sketches for ranges whose differences are scattered, and the sync
// protocol's frames that carry it (HELLO, WANT, RANGES). A side describes
// ranges of its set by fingerprints; the other splits the ranges whose
// fingerprints differ, answers small ones with id lists or sketches, and,
// once it knows both sides of a range, pushes what the peer lacks and asks
// for what it lacks. The cost grows with the difference, not the sets.
//
// A Reconciler plans one side's turns from a *store.SyncSet and the items
// the node refused (counted as held); it does no I/O: the swarm's sync
// sessions move the frames and the claims. docs/protocols.md ("Catch-up")
// is the wire contract another implementation must follow.
//
// It imports no libp2p and nothing of the swarm but its framing
// (swarm/internal/wire). A Reconciler belongs to one session's goroutine;
// the package has no goroutines and no shared state.
package reconcile
