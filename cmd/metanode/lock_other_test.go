//go:build !unix

package main

import (
	"os"
	"testing"
)

// holdLock: the node takes no data directory lock on this platform.
func holdLock(*testing.T, *os.File) bool { return false }
