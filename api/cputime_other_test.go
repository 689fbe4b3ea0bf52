//go:build !unix

package api_test

import "time"

// cpuTime is not measured on this platform: the CPU-time figures read 0.
func cpuTime() time.Duration { return 0 }
