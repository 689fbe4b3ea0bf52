//go:build unix

package main

import (
	"os"
	"syscall"
	"testing"
)

// holdLock takes the data directory lock the way a running node does;
// false where the node takes none.
func holdLock(t *testing.T, f *os.File) bool {
	t.Helper()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	return true
}
