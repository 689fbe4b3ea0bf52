// Package archtest holds no code, only tests that keep the architecture
// honest across the module: every package has a doc comment in exactly one
// file, imports follow cmd → node → {api, swarm, store} (api and swarm never
// import each other, store imports nothing of ours), the reconciliation
// algorithm depends on no libp2p, and every package with tests checks for
// leaked goroutines in its TestMain.
//
// The tests read the source with go list and go/parser; they start no
// goroutines of their own.
package archtest
