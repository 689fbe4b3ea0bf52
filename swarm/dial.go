package swarm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/pnet"
	lswarm "github.com/libp2p/go-libp2p/p2p/net/swarm"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// MDNSService is the mDNS service name of metanode (not libp2p's default,
// so a LAN full of IPFS nodes is not dialed).
const MDNSService = "_metanode._udp"

const (
	// dialTimeout bounds one dial including the security handshake. A
	// healthy handshake takes milliseconds on a LAN and well under a second
	// across the Internet; a mismatched swarm key never completes, so this
	// is also how long it takes to report one.
	dialTimeout  = 4 * time.Second
	probeTimeout = 2 * time.Second

	bootstrapCheck      = 2 * time.Second
	bootstrapBackoffMin = time.Second
	bootstrapBackoffMax = 5 * time.Minute
	// bootstrapQuiet: with none of its bootstrap peers connected for this
	// long, a node logs a warning: a stale or mistyped address otherwise
	// leaves it alone and silent.
	bootstrapQuiet = time.Minute
)

// LoadSwarmKey reads a go-ipfs swarm.key file (/key/swarm/psk/1.0.0/ then
// /base16/, /base64/ or /bin/ and the key).
func LoadSwarmKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("swarm key: %w", err)
	}
	defer f.Close()
	return ParseSwarmKey(f)
}

// ParseSwarmKey decodes a swarm.key in the go-ipfs format.
func ParseSwarmKey(r io.Reader) ([]byte, error) {
	psk, err := pnet.DecodeV1PSK(r)
	if err != nil {
		return nil, fmt.Errorf("swarm key: %w", err)
	}
	if len(psk) != 32 {
		return nil, fmt.Errorf("swarm key: %d bytes, want 32", len(psk))
	}
	return psk, nil
}

// ErrCannotNegotiate: a peer's address accepts TCP connections but the
// libp2p handshake fails: most often the two nodes do not use the same
// swarm key (or one has none).
var ErrCannotNegotiate = errors.New("swarm key mismatch / cannot negotiate")

// dial connects to a peer, each attempt within dialTimeout. When the dial
// fails but a plain TCP connection to one of its addresses succeeds, the
// handshake is what failed: it dials twice more (a simultaneous open is a
// race), then reports ErrCannotNegotiate with the address, in the log and
// in Status().Errors, instead of leaving the owner with a timeout. It is
// for peers the owner named (bootstrap, Connect, Pair) or that were reached
// before (LAN redials); see dialFound for peers mDNS announced.
func (s *Swarm) dial(ctx context.Context, ai peer.AddrInfo) error {
	return s.dialWith(ctx, ai, true)
}

// dialFound dials a peer mDNS announced: as dial, with the retries that
// get past a simultaneous open, but a failed handshake is only logged at
// debug level. Anyone on the LAN can announce peers at any address, and a
// mismatch with one the owner never configured nor reached says nothing
// about this node's setup (a LAN peer reached once is redialed with dial).
func (s *Swarm) dialFound(ctx context.Context, ai peer.AddrInfo) error {
	return s.dialWith(ctx, ai, false)
}

func (s *Swarm) dialWith(ctx context.Context, ai peer.AddrInfo, report bool) error {
	if ai.ID == s.host.ID() {
		return nil
	}
	err := s.connectOnce(ctx, ai)
	if err == nil || ctx.Err() != nil {
		return err
	}
	addrs := ai.Addrs
	if len(addrs) == 0 {
		addrs = s.host.Peerstore().Addrs(ai.ID)
	}
	addr, ok := probeTCP(ctx, addrs, s.isOwn)
	if !ok {
		return err // unreachable, or no TCP address: nothing to report
	}
	// TCP works, the handshake failed. Two nodes that dial each other at
	// the same moment from their listen ports (TCP reuseport; mDNS makes
	// both dial at once on a LAN) can meet in a TCP simultaneous open: both
	// start the handshake as its client and it fails exactly as a wrong
	// swarm key does. That is a race; a mismatch is not: dial again after a
	// random pause before reporting anything (twice: the two nodes' retries
	// could meet again). The peer's own dial may have won meanwhile.
	for range 2 {
		select {
		case <-time.After(time.Duration(50+rand.IntN(250)) * time.Millisecond):
		case <-ctx.Done():
			return err
		}
		if s.host.Network().Connectedness(ai.ID) == network.Connected {
			return nil
		}
		if err = s.connectOnce(ctx, ai); err == nil || ctx.Err() != nil {
			return err
		}
	}
	err = fmt.Errorf("%w with %s at %s: %v; %s", ErrCannotNegotiate, ai.ID, addr, err, s.negotiateHint())
	if !report {
		s.log.Info("LAN peer did not complete a handshake (another swarm key, or not a metanode)",
			"peer", ai.ID, "addr", addr)
		return err
	}
	s.reportNegotiation(ai.ID, addr, err)
	return err
}

// reportNegotiation tells the owner that the handshake with p at addr
// fails. The status keeps one entry per peer and address: the inner error
// of a key mismatch varies from dial to dial (the peer's XSalsa20 stream
// read as multistream-select), and each repeat replaces the last.
func (s *Swarm) reportNegotiation(p peer.ID, addr ma.Multiaddr, err error) {
	s.errs.add("negotiate "+p.String()+" "+addr.String(), err.Error(), time.Now())
	s.log.Error("cannot negotiate with peer", "peer", p, "addr", addr, "err", err)
}

// negotiateHint says what to check when a handshake fails: the swarm key
// in a private swarm; else the address (a wrong port, say the API's, also
// accepts TCP), whether the peer's node answers, and whether it is full
// (review s12 A4: a peer at its connection limit resets the handshake).
func (s *Swarm) negotiateHint() string {
	if len(s.cfg.PSK) > 0 {
		return "check that both nodes use the same swarm.key"
	}
	return "this node has no swarm key, so check that the address is the peer's swarm port " +
		"(its --listen, default 4001), that its node is responding, and that it has no swarm key either; " +
		"a peer at its connection limit also drops new handshakes (then this passes when it has room)"
}

// isOwn reports whether a resolved TCP address is one this node listens
// on: a code or bootstrap list made on another machine may name
// 127.0.0.1:4001 (or localhost), which here is this node, and its TCP
// answer says nothing about the peer.
func (s *Swarm) isOwn(a net.Addr) bool {
	m, err := manet.FromNetAddr(a)
	if err != nil {
		return false
	}
	own, err := s.host.Network().InterfaceListenAddresses()
	return err == nil && slices.ContainsFunc(own, func(o ma.Multiaddr) bool { return sameTCP(m, o) })
}

// sameTCP reports whether a and b name the same TCP ip:port.
func sameTCP(a, b ma.Multiaddr) bool {
	na, ha, err := manet.DialArgs(a)
	if err != nil || (na != "tcp4" && na != "tcp6") {
		return false
	}
	nb, hb, err := manet.DialArgs(b)
	return err == nil && na == nb && ha == hb
}

func (s *Swarm) connectOnce(ctx context.Context, ai peer.AddrInfo) error {
	if sw, ok := s.host.Network().(*lswarm.Swarm); ok {
		sw.Backoff().Clear(ai.ID) // the caller paces redials
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	return s.host.Connect(dctx, ai)
}

// probeTCP reports the first TCP address that accepts a plain connection
// from something other than this node (own).
func probeTCP(ctx context.Context, addrs []ma.Multiaddr, own func(net.Addr) bool) (ma.Multiaddr, bool) {
	var d net.Dialer
	for _, a := range addrs {
		if _, err := a.ValueForProtocol(ma.P_TCP); err != nil {
			continue
		}
		network, host, err := manet.DialArgs(a)
		if err != nil {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		c, err := d.DialContext(pctx, network, host)
		cancel()
		if err == nil {
			self := own != nil && own(c.RemoteAddr())
			_ = c.Close()
			if self {
				continue // a name for this node's own listener
			}
			return a, true
		}
	}
	return nil, false
}

// runBootstrap keeps the bootstrap peers connected: each is dialed when not
// connected, with its own exponential backoff and jitter, so a bootstrap
// node that is down costs one dial per backoff period, never a storm. It
// says when a bootstrap peer is lost, and when none has been connected for
// s.bootstrapQuiet.
func (s *Swarm) runBootstrap(ctx context.Context) {
	if len(s.bootstrap) == 0 {
		return
	}
	type state struct {
		next      time.Time
		backoff   time.Duration
		connected bool
		lastErr   error
	}
	st := make([]state, len(s.bootstrap))
	lastConnected, warned := time.Now(), false // since when none is connected
	t := time.NewTicker(bootstrapCheck)
	defer t.Stop()
	for {
		now := time.Now()
		anyUp := false
		for i, ai := range s.bootstrap {
			if s.host.Network().Connectedness(ai.ID) == network.Connected {
				st[i].backoff, st[i].connected, anyUp = 0, true, true
				continue
			}
			if st[i].connected {
				st[i].connected = false
				s.log.Info("bootstrap peer disconnected; redialing", "peer", ai.ID)
			}
			if now.Before(st[i].next) {
				continue
			}
			err := s.dial(ctx, ai)
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				st[i].backoff, st[i].connected, anyUp = 0, true, true
				s.log.Info("bootstrap peer connected", "peer", ai.ID)
				continue
			}
			st[i].lastErr = err
			st[i].backoff = min(max(2*st[i].backoff, bootstrapBackoffMin), bootstrapBackoffMax)
			jitter := time.Duration(rand.Int64N(int64(st[i].backoff)/2 + 1))
			st[i].next = time.Now().Add(st[i].backoff + jitter)
			s.log.Debug("bootstrap dial failed", "peer", ai.ID, "retry_in", st[i].backoff+jitter, "err", err)
		}
		switch {
		case anyUp:
			lastConnected, warned = time.Now(), false
		case !warned && time.Since(lastConnected) >= s.bootstrapQuiet:
			warned = true
			var addrs []string
			var last error
			for i, ai := range s.bootstrap {
				for _, a := range ai.Addrs {
					addrs = append(addrs, a.String()+"/p2p/"+ai.ID.String())
				}
				last = cmp.Or(st[i].lastErr, last)
			}
			msg := fmt.Sprintf("no bootstrap peer reachable for %s (%s): check the addresses ('metanode id' on that node prints its own) and that it runs", s.bootstrapQuiet.Round(time.Second), strings.Join(addrs, ", "))
			// A log line, not a Status error: those make /health degraded,
			// which an unreachable bootstrap peer alone must not
			// (node/backend.go swarmCheck, docs/operations.md).
			s.log.Warn(msg, "last_err", last)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
