package reconcile

// Test-only access for the external tests.

// RandItems is randItems.
var RandItems = randItems

// RaceEnabled: the race detector makes the 1M-item measurements slow.
const RaceEnabled = raceEnabled
