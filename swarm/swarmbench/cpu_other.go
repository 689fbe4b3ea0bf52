//go:build !unix

package swarmbench

import "time"

// cpuTime is unknown here: CPU-time ratios are not reported.
func cpuTime() time.Duration { return 0 }
