package swarm

import (
	"fmt"
	"math"
	"net/netip"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/pnet"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	"github.com/libp2p/go-libp2p/x/rate"

	"github.com/metanode/metanode/store"
)

const peerstoreForever = peerstore.PermanentAddrTTL

// UserAgent is what identify tells peers.
const UserAgent = "metanode/1"

// PeerKey returns the libp2p private key of a node signer: the same
// secp256k1 scalar, so the peer id and the claim-signing uid name one key.
func PeerKey(signer *store.Signer) (crypto.PrivKey, error) {
	sk, err := crypto.UnmarshalSecp256k1PrivateKey(signer.PrivateKey().Serialize())
	if err != nil {
		return nil, fmt.Errorf("node key: %w", err)
	}
	return sk, nil
}

// PeerIDOf returns the peer id of a node signer.
func PeerIDOf(signer *store.Signer) (peer.ID, error) {
	sk, err := PeerKey(signer)
	if err != nil {
		return "", err
	}
	return peer.IDFromPrivateKey(sk)
}

// defaultListen returns the listen addresses used when Config.Listen is
// empty: TCP and QUIC on DefaultPort, IPv4 and IPv6.
func defaultListen() []string {
	p := fmt.Sprint(DefaultPort)
	return []string{
		"/ip4/0.0.0.0/tcp/" + p, "/ip6/::/tcp/" + p,
		"/ip4/0.0.0.0/udp/" + p + "/quic-v1", "/ip6/::/udp/" + p + "/quic-v1",
	}
}

// tcpOnly drops the UDP addresses: QUIC refuses a pre-shared key.
func tcpOnly(addrs []string) []string {
	var out []string
	for _, a := range addrs {
		if !strings.Contains(a, "/udp/") {
			out = append(out, a)
		}
	}
	return out
}

func (s *Swarm) buildHost() (host.Host, error) {
	sk, err := PeerKey(s.cfg.Identity)
	if err != nil {
		return nil, err
	}
	listen := s.cfg.Listen
	if len(listen) == 0 {
		listen = defaultListen()
	}
	if s.cfg.PSK != nil {
		if dropped := droppedUDP(s.cfg.Listen); len(dropped) > 0 {
			s.log.Warn("a private swarm runs over TCP only: QUIC refuses a pre-shared key; not listening on these addresses", "addrs", dropped)
		}
		listen = tcpOnly(listen)
	}
	if err := probeListen(listen); err != nil {
		return nil, err
	}
	low := max(1, s.cfg.MaxConns*3/4)
	cm, err := connmgr.NewConnManager(low, s.cfg.MaxConns, connmgr.WithGracePeriod(s.connGrace))
	if err != nil {
		return nil, fmt.Errorf("connection manager: %w", err)
	}
	rm, err := newResourceManager(s.cfg.MaxConns)
	if err != nil {
		cm.Close()
		return nil, fmt.Errorf("resource manager: %w", err)
	}
	h, err := libp2p.New(s.hostOptions(sk, listen, cm, rm)...)
	if err != nil {
		rm.Close()
		return nil, fmt.Errorf("libp2p host: %w", err)
	}
	return h, nil
}

// hostOptions are the libp2p options of the host buildHost makes. NAT
// traversal is here and only here: hole punching registers its protocol
// only once the host has a public address and the relay service only once
// it is reachable, so on loopback the options are what a test can check.
func (s *Swarm) hostOptions(sk crypto.PrivKey, listen []string, cm *connmgr.BasicConnMgr, rm network.ResourceManager) []libp2p.Option {
	opts := []libp2p.Option{
		libp2p.Identity(sk),
		libp2p.UserAgent(UserAgent),
		libp2p.ConnectionManager(cm),
		libp2p.ResourceManager(rm),
		libp2p.ConnectionGater(s.gater),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.EnableAutoNATv2(),
		libp2p.EnableHolePunching(),
	}
	if s.cfg.PSK != nil {
		opts = append(opts, libp2p.PrivateNetwork(pnet.PSK(s.cfg.PSK)))
	} else {
		opts = append(opts, libp2p.Transport(quic.NewTransport))
	}
	opts = append(opts, libp2p.ListenAddrStrings(listen...))
	if s.cfg.PortMap {
		opts = append(opts, libp2p.NATPortMap())
	}
	if s.cfg.Public {
		opts = append(opts, libp2p.ForceReachabilityPublic())
	}
	if s.cfg.RelayService || s.cfg.DHTServer {
		// Serve AutoNAT v1 so homes learn their reachability (the DHT's
		// auto mode and the relay client follow it).
		opts = append(opts, libp2p.EnableNATService())
	}
	if s.cfg.RelayService {
		opts = append(opts, libp2p.EnableRelayService())
	}
	if len(s.relays) > 0 {
		opts = append(opts, libp2p.EnableAutoRelayWithStaticRelays(s.relays))
	}
	if s.cfg.Registerer != nil {
		opts = append(opts, libp2p.PrometheusRegisterer(s.cfg.Registerer))
	} else {
		opts = append(opts, libp2p.DisableMetrics())
	}
	return opts
}

// connGrace is how long a new connection is kept from the connection
// manager's trims (libp2p's default is a minute). go-libp2p v0.52's
// connmgr never trims a peer within it, and does not trim at all while
// fewer than its low water of peers are past it: 252 fresh peer ids
// connecting at once filled the resource manager's inbound connections
// (about 251 on a 24 GB machine, far above the 64 of --max-conns) and kept a
// new node out for 45 s (review s12 A3). An honest peer needs far less to
// show it is useful (markUseful): the sync at connection takes a round
// trip or two, and a longer one (a cold catch-up) holds a stream open,
// which trims spare (connections without streams go first). The
// resource manager's limit is left as it is: lowering it to near the high
// water would only let fewer fresh ids fill it, since they are kept for
// their grace whatever the limit.
const connGrace = 20 * time.Second

// Tagging peers that brought this node claims new to it, by sync or gossip:
// trims close the connections of the lowest valued peers first, so fresh
// ids that did nothing go before them. Above the tags libp2p sets itself
// (kad-dht's routing table 5, gossipsub's mesh 20, its deliveries at most
// 15). The tag lasts while the peer stays connected.
const (
	usefulTag   = "metanode-useful"
	usefulValue = 50
)

// markUseful tags p as useful in the connection manager (a no-op on hosts
// without one, such as mocknet's). Not in open trust: there a claim signed
// by a key made a moment ago is new here too, so each fresh id would buy
// the tag with one signature and outrank honest peers that only pull
// (review s12 E1); an open node (a bootstrap) has the short grace alone.
func (s *Swarm) markUseful(p peer.ID) {
	if s.cfg.Store.TrustMode() == store.TrustOpen {
		return
	}
	if h := s.host; h != nil {
		h.ConnManager().TagPeer(p, usefulTag, usefulValue)
	}
}

// Resource manager limits. The library defaults allow 8 connections per
// IPv4 address and 0.2 new inbound connections per second per address,
// which breaks a LAN of homes behind one router or a shared (CG)NAT: every
// peer there shows the same address. Ours:
const (
	connsPerIPv4       = 64  // concurrent connections per IPv4 /32
	connsPerIPv6Subnet = 64  // per IPv6 /56
	connsPerIPv6Site   = 256 // per IPv6 /48
	connsPrivateNet    = 512 // per private (LAN, CGNAT) prefix
	inboundRatePerIP   = 2.0 // new inbound connections per second per /32 or /56
	inboundBurstPerIP  = 64
)

var privatePrefixes = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fe80::/10"),
}

// scaledLimits are libp2p's default limits scaled to this machine, with
// the system's connection limits raised to what the connection manager is
// set for. libp2p scales them with an eighth of the machine's memory (64
// inbound plus 64 per GiB above 128 MiB): about 88 inbound connections on
// a 4 GB VPS, far below a bootstrap node's 512. The floor leaves half the
// high water again above it, since trims run every 10 s and spare peers in
// their grace.
func scaledLimits(maxConns int) rcmgr.ConcreteLimitConfig {
	limits := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&limits)
	scaled := limits.AutoScale()
	p := scaled.ToPartialLimitConfig()
	floor := maxConns + maxConns/2
	for _, v := range []*rcmgr.LimitVal{&p.System.ConnsInbound, &p.System.ConnsOutbound, &p.System.Conns} {
		if *v > 0 && int(*v) < floor { // not Unlimited (-1) nor BlockAll (-2)
			*v = rcmgr.LimitVal(floor)
		}
	}
	return p.Build(scaled)
}

func newResourceManager(maxConns int) (network.ResourceManager, error) {
	var v4, v6 []rcmgr.NetworkPrefixLimit
	var ratePrefixes []rate.PrefixLimit
	for _, p := range append(privatePrefixes, netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")) {
		n := connsPrivateNet
		if p.Addr().IsLoopback() {
			n = math.MaxInt
		}
		if p.Addr().Is4() {
			v4 = append(v4, rcmgr.NetworkPrefixLimit{Network: p, ConnCount: n})
		} else {
			v6 = append(v6, rcmgr.NetworkPrefixLimit{Network: p, ConnCount: n})
		}
		ratePrefixes = append(ratePrefixes, rate.PrefixLimit{Prefix: p, Limit: rate.Limit{}}) // unlimited
	}
	perIP := rate.Limit{RPS: inboundRatePerIP, Burst: inboundBurstPerIP}
	connRate := &rate.Limiter{
		NetworkPrefixLimits: ratePrefixes,
		SubnetRateLimiter: rate.SubnetLimiter{
			IPv4SubnetLimits: []rate.SubnetLimit{{PrefixLength: 32, Limit: perIP}},
			IPv6SubnetLimits: []rate.SubnetLimit{{PrefixLength: 56, Limit: perIP},
				{PrefixLength: 48, Limit: rate.Limit{RPS: 4 * inboundRatePerIP, Burst: 4 * inboundBurstPerIP}}},
			GracePeriod: time.Minute,
		},
	}
	return rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(scaledLimits(maxConns)),
		rcmgr.WithLimitPerSubnet(
			[]rcmgr.ConnLimitPerSubnet{{PrefixLength: 32, ConnCount: connsPerIPv4}},
			[]rcmgr.ConnLimitPerSubnet{{PrefixLength: 56, ConnCount: connsPerIPv6Subnet}, {PrefixLength: 48, ConnCount: connsPerIPv6Site}}),
		rcmgr.WithNetworkPrefixLimit(v4, v6),
		rcmgr.WithConnRateLimiters(connRate),
	)
}
