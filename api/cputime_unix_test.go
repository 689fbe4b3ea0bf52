//go:build unix

package api_test

import (
	"syscall"
	"time"
)

// cpuTime is the process's user+system CPU time so far. On a shared
// machine wall-clock rates move with the neighbours' load; CPU time per
// request much less, and 2 cores / CPU per request is the rate the two
// cores would give this process alone.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
