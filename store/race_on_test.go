//go:build race

package store_test

// raceEnabled: the race detector makes SQLite (transpiled C) about 25
// times slower, so the largest tests scale down under it.
const raceEnabled = true
