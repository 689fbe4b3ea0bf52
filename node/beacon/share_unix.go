//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package beacon

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// shareAddr lets every beacon listener on the host bind the group's port
// (a service and this node on one machine, as upstream's do): multicast
// reaches each of them.
func shareAddr(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
		if serr == nil {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}
	})
	if err != nil {
		return err
	}
	return serr
}
