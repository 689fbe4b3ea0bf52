//go:build linux

package swarm_test

import (
	"context"
	"crypto/rand"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/sec"
	"github.com/libp2p/go-libp2p/core/transport"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/net/upgrader"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

// Addresses the test gives lo inside its namespace: a public-looking
// server and two public clients (TEST-NET-3), and a client on a private
// prefix.
const (
	rcServer  = "203.0.113.1"
	rcPublic  = "203.0.113.2"
	rcPublic2 = "203.0.113.3"
	rcPrivate = "10.9.0.2"
	perIPv4   = 64 // swarm/host.go connsPerIPv4 and inboundBurstPerIP; protocols.md
)

// The resource manager the swarm builds is in force on real hosts: one
// public IPv4 address may hold 64 connections to a node (homes behind one
// NAT; the library's default is 8) and no more, while a peer at another
// address is still served; a private prefix is not held to the per-address
// limit. The test needs source addresses of its own, so it runs in a
// private network namespace. The 65th connection from one address is
// refused by the count (64 at once) or the rate (a burst of 64), whichever
// binds first: both are ours.
func TestResourceManager_ConnsPerAddress(t *testing.T) {
	if !inNetns(t, "ip addr add "+rcServer+"/32 dev lo", "ip addr add "+rcPublic+"/32 dev lo",
		"ip addr add "+rcPublic2+"/32 dev lo", "ip addr add "+rcPrivate+"/32 dev lo") {
		return
	}
	listen := func(c *swarm.Config) { c.Listen = []string{"/ip4/" + rcServer + "/tcp/0"} }
	srv := newNode(t, nodeOpt{swarm: listen})
	w, _ := store.GenerateSigner()
	claims := signMany(w, 0, 3, uint64(time.Now().UnixMilli())-1000)
	srv.submit(t, claims)
	target := peer.AddrInfo{ID: srv.id, Addrs: srv.sw.Host().Addrs()}

	crowd := dialFrom(t, rcPublic, perIPv4, target)
	for i, err := range crowd {
		if err != nil {
			t.Fatalf("connection %d of %d from one public address refused: %v", i+1, perIPv4, err)
		}
	}
	// A dial returns once the handshake is done; the node adds the
	// connection just after.
	waitFor(t, 10*time.Second, "the node to hold every connection", func() bool {
		return connsFrom(srv, rcPublic) == perIPv4
	})
	if err := dialFrom(t, rcPublic, 1, target)[0]; err == nil {
		t.Fatalf("connection %d from one public address accepted", perIPv4+1)
	}

	// A node at another address still connects and is served (sync on
	// connect brings it the server's claims).
	friend := newNode(t, nodeOpt{swarm: func(c *swarm.Config) {
		sk, err := swarm.PeerKey(c.Identity)
		if err != nil {
			t.Fatal(err)
		}
		c.Host = clientHost(t, rcPublic2, libp2p.Identity(sk))
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := friend.sw.Host().Connect(ctx, target); err != nil {
		t.Fatalf("a peer at another address was refused: %v", err)
	}
	waitFor(t, 20*time.Second, "the server to serve the other peer", func() bool { return friend.holds(claims...) })

	// A private prefix (a LAN, a CGNAT) is limited per prefix (512), not
	// per address.
	for i, err := range dialFrom(t, rcPrivate, perIPv4+1, target) {
		if err != nil {
			t.Fatalf("connection %d from one private address refused: %v", i+1, err)
		}
	}
}

// clientHost is a libp2p host whose TCP dials leave from src, with no
// resource manager of its own and no listener.
func clientHost(t testing.TB, src string, opts ...libp2p.Option) host.Host {
	t.Helper()
	h, err := libp2p.New(append(opts,
		libp2p.NoListenAddrs,
		libp2p.Transport(tcp.NewTCPTransport, tcp.WithDialerForAddr(dialerFrom(src))),
		libp2p.ResourceManager(&network.NullResourceManager{}),
		libp2p.DisableMetrics(),
	)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func dialerFrom(src string) tcp.DialerForAddr {
	local := &net.TCPAddr{IP: net.ParseIP(src)}
	return func(ma.Multiaddr) (tcp.ContextDialer, error) { return &net.Dialer{LocalAddr: local}, nil }
}

// dialFrom opens n libp2p connections (Noise, yamux) from src to target,
// each as a new peer id, a few at a time, and returns each dial's error.
// The peers are bare transports, not hosts (building a host costs tens of
// ms under the race detector): they refuse every stream the node opens. The
// connections stay open until the test ends.
func dialFrom(t testing.TB, src string, n int, target peer.AddrInfo) []error {
	t.Helper()
	errs := make([]error, n)
	var wg, refusers sync.WaitGroup
	// Registered first, so it runs after the connections' Close (cleanups
	// run last-in first-out), which ends the refusers.
	t.Cleanup(refusers.Wait)
	const workers = 4
	for k := range workers {
		wg.Go(func() {
			for i := k; i < n; i += workers {
				c, err := dialOnce(src, target)
				errs[i] = err
				if err != nil {
					continue
				}
				t.Cleanup(func() { _ = c.Close() })
				refusers.Go(func() { // refuse the node's streams until the connection closes
					for {
						st, err := c.AcceptStream()
						if err != nil {
							return
						}
						_ = st.Reset()
					}
				})
			}
		})
	}
	wg.Wait()
	return errs
}

func dialOnce(src string, target peer.AddrInfo) (transport.CapableConn, error) {
	sk, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, err
	}
	secure, err := noise.New(noise.ID, sk, nil)
	if err != nil {
		return nil, err
	}
	rm := &network.NullResourceManager{}
	u, err := upgrader.New([]sec.SecureTransport{secure},
		[]upgrader.StreamMuxer{{ID: yamux.ID, Muxer: yamux.DefaultTransport}}, nil, rm, nil)
	if err != nil {
		return nil, err
	}
	tpt, err := tcp.NewTCPTransport(u, rm, nil, tcp.WithDialerForAddr(dialerFrom(src)))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return tpt.Dial(ctx, target.Addrs[0], target.ID)
}

// connsFrom counts n's connections whose remote address is ip.
func connsFrom(n *node, ip string) int {
	k := 0
	for _, c := range n.sw.Host().Network().Conns() {
		if a, err := manet.ToIP(c.RemoteMultiaddr()); err == nil && a.String() == ip {
			k++
		}
	}
	return k
}
