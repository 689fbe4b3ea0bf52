package swarm

// Test-only access to internals for the external tests.
var EncodeGossip = encodeGossip

// RaceEnabled: the race detector makes SQLite (and so the store) many
// times slower; the heaviest tests move fewer claims under it.
const RaceEnabled = raceEnabled
