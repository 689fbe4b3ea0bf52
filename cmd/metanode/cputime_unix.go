//go:build unix

package main

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) this process has used; ok is
// false where it cannot be read.
func processCPU() (d time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
