package swarm

// Test-only access to internals for the external tests.
var EncodeGossip = encodeGossip
