package api

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"
)

// ExposedError is Open's error for a TCP listener beyond loopback with
// neither an API token nor a local network: every caller but loopback
// would get 401, which is never what was meant.
type ExposedError struct{ Addr string }

func (e *ExposedError) Error() string {
	return "the API would listen on " + e.Addr + " beyond loopback with no API token and no local network: " +
		"callers there could use nothing; give the node a token (Config.Token; metanode serve makes <data>/api.token) " +
		"or declare their network local (local-networks, e.g. --local-networks 192.168.1.0/24), or listen on 127.0.0.1"
}

// listenSocket listens on the Unix socket path, made 0600 (owner only:
// every caller on it is local). A socket file left by a process that died
// is removed first; a live one (another node answers on it) is an error.
func listenSocket(ctx context.Context, path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("unix socket %s: a file that is not a socket is in the way", path)
		}
		d := net.Dialer{Timeout: time.Second}
		c, err := d.DialContext(ctx, "unix", path)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("unix socket %s: another process answers on it", path)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("unix socket %s: %w", path, err)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("unix socket %s: remove the stale socket: %w", path, err)
		}
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("unix socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("unix socket %s: %w", path, err)
	}
	return ln, nil
}

// markSocket tags a connection accepted on the Unix socket (http.Server's
// ConnContext), which localAddr reads.
func markSocket(ctx context.Context, c net.Conn) context.Context {
	if _, ok := c.(*net.UnixConn); ok {
		return context.WithValue(ctx, socketKey{}, true)
	}
	return ctx
}

func prefixStrings(ps []netip.Prefix) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}
