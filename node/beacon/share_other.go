//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package beacon

import "syscall"

// shareAddr: no port sharing here; the beacon binds the port alone.
func shareAddr(_, _ string, _ syscall.RawConn) error { return nil }
