//go:build race

package reconcile

const raceEnabled = true
