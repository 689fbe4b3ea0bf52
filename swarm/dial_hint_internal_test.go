package swarm

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"
)

// TestDial_NegotiateReports: a handshake that fails at an address that
// accepts TCP is reported with advice that fits this node (no swarm key:
// the port and the peer, not swarm.key); an address that is this node's
// own listener (a code made on another machine names 127.0.0.1:4001) is no
// negotiation failure at all. (User review: a home whose paired home was
// off reported "swarm key mismatch" at its own port, and a typo'd port
// sent owners to check a swarm.key neither node had.)
func TestDial_NegotiateReports(t *testing.T) {
	s := loopbackSwarm(t, 303)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Not a libp2p port (say the peer's HTTP API): answers and hangs up.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	wrong := ma.StringCast("/ip4/127.0.0.1/tcp/" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	err = s.dial(ctx, fakePeer(t, wrong))
	if !errors.Is(err, ErrCannotNegotiate) {
		t.Fatalf("dial of a non-libp2p port: %v, want ErrCannotNegotiate", err)
	}
	if msg := err.Error(); strings.Contains(msg, "swarm.key") || !strings.Contains(msg, "swarm port") {
		t.Errorf("a node without a swarm key is told: %s", msg)
	}

	// This node's own listener, under another peer's id.
	var own ma.Multiaddr
	for _, a := range s.host.Network().ListenAddresses() {
		if _, err := a.ValueForProtocol(ma.P_TCP); err == nil {
			own = a
		}
	}
	if own == nil {
		t.Fatal("no TCP listen address")
	}
	port, err := own.ValueForProtocol(ma.P_TCP)
	if err != nil {
		t.Fatal(err)
	}
	// By address, and by a name for it (review 10, R10-4).
	for _, a := range []ma.Multiaddr{own, ma.StringCast("/dns4/localhost/tcp/" + port)} {
		before := len(s.Status().Errors)
		err = s.dial(ctx, fakePeer(t, a))
		if err == nil || errors.Is(err, ErrCannotNegotiate) {
			t.Fatalf("dial of this node's own listener at %s as another peer: %v, want a plain dial error", a, err)
		}
		if n := len(s.Status().Errors); n != before {
			t.Errorf("a dial that reached this node itself at %s was reported: %v", a, s.Status().Errors)
		}
	}
}
