//go:build linux

package swarm_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

// mDNS for real: two nodes with MDNS on, listening on 127.0.0.1 with no
// bootstrap peer, find each other by multicast (_metanode._udp on lo, in a
// private network namespace: the machine's lo has no MULTICAST flag),
// connect, and a claim written on one reaches the other's store; when their
// connection drops they reconnect. Then the other kinds of neighbour a LAN
// can hold:
//   - a node with another swarm name, no key, connects and reconciles
//     (protocols.md: the name separates gossip and DHT lookups only);
//   - a node with another swarm key hears the same mDNS service and dials,
//     but no connection forms either way (a swarm key is what closes a
//     swarm); the failed handshake is logged at info and not reported as
//     an error: anyone on a LAN can announce a peer, a neighbour's home in
//     another private swarm is no fault of this one.
func TestMDNS_Netns(t *testing.T) {
	// zeroconf joins 224.0.0.251 and ff02::fb on every up interface with
	// MULTICAST and sends on each by index: no route needed.
	if !inNetns(t, "ip link set lo multicast on") {
		return
	}
	withMDNS := func(c *swarm.Config) { c.MDNS = true }
	var logA, logB logCapture
	a := newNode(t, nodeOpt{swarm: func(c *swarm.Config) { c.MDNS, c.Logger = true, logA.logger() }})
	b := newNode(t, nodeOpt{swarm: func(c *swarm.Config) { c.MDNS, c.Logger = true, logB.logger() }})
	connected := func(x, y *node) bool {
		return x.sw.Host().Network().Connectedness(y.id) == network.Connected
	}
	waitFor(t, 30*time.Second, "a and b to find each other by mDNS", func() bool {
		return connected(a, b) && connected(b, a)
	})
	waitForMesh(t, []*node{a, b})
	w, _ := store.GenerateSigner()
	ts := uint64(time.Now().UnixMilli()) - 1000
	first := signMany(w, 0, 3, ts)
	a.submit(t, first)
	waitFor(t, 20*time.Second, "a's claims in b's store", func() bool { return b.holds(first...) })

	// mDNS reports a peer once per record TTL (most of an hour): a dropped
	// connection between two LAN-only homes comes back by the connector's
	// redial (lan.go), not by discovery.
	_ = a.sw.Host().Network().ClosePeer(b.id)
	_ = b.sw.Host().Network().ClosePeer(a.id)
	waitFor(t, 30*time.Second, "a and b to reconnect after their connection dropped", func() bool {
		return connected(a, b) && connected(b, a)
	})
	second := signMany(w, 10, 2, ts+10)
	b.submit(t, second)
	waitFor(t, 20*time.Second, "b's claims in a's store after the reconnection", func() bool { return a.holds(second...) })

	other := newNode(t, nodeOpt{swarm: func(c *swarm.Config) { c.MDNS, c.Name = true, "other" }})
	waitFor(t, 30*time.Second, "a node of another swarm name to connect and reconcile", func() bool {
		return connected(other, a) && other.holds(first...)
	})
	// Only now the stranger: the connector dials one found peer at a time,
	// and each dial of a stranger may take three attempts of up to 4 s.
	stranger := newNode(t, nodeOpt{psk: newPSK(t), swarm: withMDNS})
	// a and b dial the stranger they heard of and give up on it.
	for _, l := range []*logCapture{&logA, &logB} {
		waitFor(t, 30*time.Second, "a failed handshake with the stranger to be logged", func() bool {
			return l.has("LAN peer did not complete a handshake", "peer="+stranger.id.String())
		})
	}
	for _, n := range []*node{a, b, other} {
		if connected(n, stranger) || connected(stranger, n) {
			t.Fatalf("a node with another swarm key is connected to %s", n.id)
		}
		if errs := n.sw.Status().Errors; slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, stranger.id.String()) }) {
			t.Fatalf("a LAN stranger reported as an error: %q", errs)
		}
	}
	if !connected(a, b) || !connected(b, a) {
		t.Fatal("a and b lost their connection")
	}
}
