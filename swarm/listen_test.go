package swarm_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/metanode/metanode/swarm"
)

// A second node on a swarm port another node listens on is refused at
// start with EADDRINUSE (libp2p's SO_REUSEPORT would let both listen and
// share inbound connections at random), for TCP and for QUIC's UDP port.
func TestOpen_ListenPortInUse(t *testing.T) {
	first := newNode(t, nodeOpt{swarm: func(c *swarm.Config) {
		c.Listen = []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}
	}})
	var tcpAddr, udpAddr string
	for _, a := range first.sw.Status().Addrs {
		a, _, _ = strings.Cut(a, "/p2p/")
		switch {
		case strings.Contains(a, "/tcp/") && tcpAddr == "":
			tcpAddr = a
		case strings.Contains(a, "/quic-v1") && udpAddr == "":
			udpAddr = a
		}
	}
	if tcpAddr == "" || udpAddr == "" {
		t.Fatalf("first node's addrs %v lack a TCP or a QUIC address", first.sw.Status().Addrs)
	}
	for _, addr := range []string{tcpAddr, udpAddr} {
		second := newNode(t, nodeOpt{noOpen: true, swarm: func(c *swarm.Config) { c.Listen = []string{addr} }})
		err := second.sw.Open(context.Background())
		if err == nil {
			_ = second.sw.Close()
			t.Fatalf("a second node opened on %s, which the first listens on", addr)
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("open on %s: %v, want EADDRINUSE", addr, err)
		}
		_ = second.sw.Close()
	}
}
