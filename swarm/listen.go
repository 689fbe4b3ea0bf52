package swarm

import (
	"fmt"
	"net"
	"strings"

	ma "github.com/multiformats/go-multiaddr"
)

// probeListen binds each TCP and UDP listen address with a fixed port for
// an instant, without SO_REUSEPORT, and releases it. libp2p listens with
// SO_REUSEPORT (hole punching dials from the listen port), so a second
// node on the same port would start without a word and share inbound
// connections with the first at random; the probe turns that into an
// EADDRINUSE at start. Port 0 and addresses without a port are skipped.
func probeListen(addrs []string) error {
	for _, a := range addrs {
		m, err := ma.NewMultiaddr(a)
		if err != nil {
			return fmt.Errorf("listen address %q: %w", a, err)
		}
		ip, err := m.ValueForProtocol(ma.P_IP4)
		if err != nil {
			if ip, err = m.ValueForProtocol(ma.P_IP6); err != nil {
				continue // a dns or other address: libp2p resolves or refuses it
			}
		}
		network, port := "tcp", ""
		if p, err := m.ValueForProtocol(ma.P_TCP); err == nil {
			port = p
		} else if p, err := m.ValueForProtocol(ma.P_UDP); err == nil {
			network, port = "udp", p
		}
		if port == "" || port == "0" {
			continue
		}
		hostport := net.JoinHostPort(ip, port)
		if network == "tcp" {
			l, err := net.Listen("tcp", hostport)
			if err != nil {
				return fmt.Errorf("listen %s: %w", a, err)
			}
			l.Close()
		} else {
			c, err := net.ListenPacket("udp", hostport)
			if err != nil {
				return fmt.Errorf("listen %s: %w", a, err)
			}
			c.Close()
		}
	}
	return nil
}

// droppedUDP lists the UDP (QUIC) addresses tcpOnly removes.
func droppedUDP(addrs []string) []string {
	var out []string
	for _, a := range addrs {
		if strings.Contains(a, "/udp/") {
			out = append(out, a)
		}
	}
	return out
}
