package swarm

import (
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/config"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/host/autonat"
	"github.com/libp2p/go-libp2p/p2p/protocol/autonatv2"
	relayproto "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/proto"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// "Works behind NAT" (spec/swarm.md promise 8; protocols.md "NAT"): every
// node runs AutoNAT v2 and hole punching, bootstrap nodes also serve
// AutoNAT v1 and (bootstrap profile) the relay, and static relays make a
// relay client. DCUtR registers /libp2p/dcutr only once the host has a
// public address, never on loopback, so the hole punching promise is
// checked on the options the host is built from; the rest is checked on
// real hosts below, as a home behind NAT sees them.
func TestHost_NATOptions(t *testing.T) {
	signer := storetest.Signer(420)
	relayID, err := PeerIDOf(storetest.Signer(421))
	if err != nil {
		t.Fatal(err)
	}
	sk, err := PeerKey(signer)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		// want: the relay service, the AutoNAT v1 service and public
		// reachability (bootstrap profile); a relay client (static relays).
		service, client bool
	}{
		{name: "home", cfg: Config{}},
		{name: "private home", cfg: Config{PSK: make([]byte, 32)}},
		{name: "bootstrap", cfg: Config{RelayService: true, DHTServer: true, Public: true}, service: true},
		{name: "home with a relay", cfg: Config{Relays: []string{"/ip4/127.0.0.1/tcp/1/p2p/" + relayID.String()}}, client: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(tc.cfg)
			if s.relays, err = parseAddrInfos(tc.cfg.Relays); err != nil {
				t.Fatal(err)
			}
			var c config.Config
			if err := c.Apply(s.hostOptions(sk, []string{"/ip4/127.0.0.1/tcp/0"}, nil, nil)...); err != nil {
				t.Fatal(err)
			}
			if !c.EnableAutoNATv2 || !c.EnableHolePunching {
				t.Errorf("AutoNAT v2 %v, hole punching %v: want both on every node", c.EnableAutoNATv2, c.EnableHolePunching)
			}
			public := c.ForceReachability != nil && *c.ForceReachability == network.ReachabilityPublic
			if c.EnableRelayService != tc.service || c.EnableService != tc.service || public != tc.service {
				t.Errorf("relay service %v, AutoNAT v1 service %v, forced public %v: want %v",
					c.EnableRelayService, c.EnableService, public, tc.service)
			}
			if c.EnableAutoRelay != tc.client {
				t.Errorf("relay client %v, want %v", c.EnableAutoRelay, tc.client)
			}
		})
	}
}

// A home connected to a bootstrap-profile node on loopback learns by
// identify that it can ask it for a reservation (relay hop) and for
// reachability checks (AutoNAT v1 and v2), and the bootstrap node learns
// that the home serves AutoNAT v2 too.
func TestHost_NATServicesSeenByPeers(t *testing.T) {
	open := func(seed int, cfg Config) *Swarm {
		signer := storetest.Signer(seed)
		cfg.Identity, cfg.Store = signer, storetest.Open(t, store.Config{OwnUID: signer.UID()})
		cfg.Listen, cfg.Name, cfg.SyncInterval = []string{"/ip4/127.0.0.1/tcp/0"}, "t", time.Hour
		cfg.Logger = storetest.Logger(t, 8)
		s := New(cfg)
		if err := s.Open(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	boot := open(422, Config{RelayService: true, DHTServer: true, Public: true})
	home := open(423, Config{})
	if err := home.host.Connect(t.Context(), peer.AddrInfo{ID: boot.host.ID(), Addrs: boot.host.Addrs()}); err != nil {
		t.Fatal(err)
	}
	// supports waits (bounded) until identify tells from what it sees
	// whether it speaks every protocol in want: the relay service starts
	// once the host is public, after Open, and identify pushes the change.
	supports := func(from, of *Swarm, want ...protocol.ID) []protocol.ID {
		var missing []protocol.ID
		for range 200 {
			got, err := from.host.Peerstore().GetProtocols(of.host.ID())
			if err != nil {
				t.Fatal(err)
			}
			missing = slices.DeleteFunc(slices.Clone(want), func(p protocol.ID) bool { return slices.Contains(got, p) })
			if len(missing) == 0 {
				return nil
			}
			time.Sleep(50 * time.Millisecond)
		}
		return missing
	}
	if m := supports(home, boot, relayproto.ProtoIDv2Hop, autonat.AutoNATProto, autonatv2.DialProtocol); m != nil {
		t.Errorf("the home does not see the bootstrap node serve %v", m)
	}
	if m := supports(boot, home, autonatv2.DialProtocol, autonatv2.DialBackProtocol); m != nil {
		t.Errorf("the bootstrap node does not see the home serve %v", m)
	}
}
