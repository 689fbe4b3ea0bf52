package swarm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/metanode/metanode/store"
)

// ProtocolPair is the stream protocol a joining node uses to present an
// invite token to the inviter (metanode invite / metanode join). One PAIR
// frame goes out, one PAIRED frame comes back; docs/protocols.md.
const ProtocolPair protocol.ID = "/metanode/pair/1.0.0"

// Frame types of the pair protocol.
const (
	framePair   byte = 0x20 // token
	framePaired byte = 0x21 // ok, claims, message
)

const (
	// MaxPairToken bounds an invite token on the wire.
	MaxPairToken = 256
	pairTimeout  = 20 * time.Second
	maxPairMsg   = 256
	maxPairFrame = 1 + 2 + MaxPairToken // type, token length, token
)

// PairAnswer is the inviter's answer to a pairing request.
type PairAnswer struct {
	OK      bool
	Message string // why not, when refused; shown to the joining owner
	Claims  int64  // claims the inviter shares, so the joiner can show sync progress
}

// ErrPairRefused is a pairing request the inviter answered with no: an
// unknown, used or expired token. The error text carries the inviter's reason.
var ErrPairRefused = errors.New("pairing refused")

// ErrNotInterested marks a peer claim that the node's Store wrapper did not
// keep because it is not about a cid the node is interested in (interest
// replication). The swarm counts such results as neutral: neither refused
// nor held against the peer.
var ErrNotInterested = errors.New("not of interest: this node keeps claims about its own cids only")

// Pair connects to the inviter (addrs: multiaddrs of one peer, each ending in
// /p2p/<peerId>), presents token over ProtocolPair and returns the inviter's
// answer. The joiner's uid is its authenticated peer id: the inviter learns
// it from the connection, so a token cannot be replayed for another key.
// The inviter's addresses are kept in the peerstore and the connection is
// protected like a bootstrap peer's.
func (s *Swarm) Pair(ctx context.Context, addrs []string, token []byte) (PairAnswer, error) {
	if !s.isOpen() {
		return PairAnswer{}, errNotOpen
	}
	if len(token) == 0 || len(token) > MaxPairToken {
		return PairAnswer{}, fmt.Errorf("pair: token of %d bytes (1..%d)", len(token), MaxPairToken)
	}
	ai, err := oneAddrInfo(addrs)
	if err != nil {
		return PairAnswer{}, fmt.Errorf("pair: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, pairTimeout)
	defer cancel()
	s.host.Peerstore().AddAddrs(ai.ID, ai.Addrs, peerstoreForever)
	s.host.ConnManager().Protect(ai.ID, "paired")
	if err := s.dial(ctx, ai); err != nil {
		return PairAnswer{}, fmt.Errorf("pair: connect to %s: %w", ai.ID, err)
	}
	st, err := s.host.NewStream(ctx, ai.ID, ProtocolPair)
	if err != nil {
		return PairAnswer{}, fmt.Errorf("pair: open stream to %s: %w", ai.ID, err)
	}
	ans, err := exchangePair(ctx, st, token)
	if err != nil {
		return PairAnswer{}, fmt.Errorf("pair with %s: %w", ai.ID, err)
	}
	if !ans.OK {
		return ans, fmt.Errorf("%w by %s: %s", ErrPairRefused, ai.ID, ans.Message)
	}
	return ans, nil
}

// oneAddrInfo merges multiaddrs of one peer into one AddrInfo.
func oneAddrInfo(addrs []string) (peer.AddrInfo, error) {
	infos, err := parseAddrInfos(addrs)
	if err != nil {
		return peer.AddrInfo{}, err
	}
	if len(infos) == 0 {
		return peer.AddrInfo{}, errors.New("no inviter address")
	}
	out := peer.AddrInfo{ID: infos[0].ID}
	for _, ai := range infos {
		if ai.ID != out.ID {
			return peer.AddrInfo{}, fmt.Errorf("addresses name two peers (%s, %s)", out.ID, ai.ID)
		}
		out.Addrs = append(out.Addrs, ai.Addrs...)
	}
	return out, nil
}

// exchangePair writes PAIR and reads PAIRED.
func exchangePair(ctx context.Context, st network.Stream, token []byte) (_ PairAnswer, err error) {
	stop := context.AfterFunc(ctx, func() { _ = st.Reset() })
	defer stop()
	defer func() {
		if err != nil {
			_ = st.Reset()
		} else {
			_ = st.Close()
		}
	}()
	_ = st.SetDeadline(time.Now().Add(pairTimeout))
	fw := newFrameWriter(st)
	req := binary.AppendUvarint([]byte{framePair}, uint64(len(token)))
	if err := fw.write(append(req, token...)); err != nil {
		return PairAnswer{}, err
	}
	if err := fw.flush(); err != nil {
		return PairAnswer{}, err
	}
	frame, err := newFrameReader(st).next()
	if err != nil {
		return PairAnswer{}, err
	}
	switch frame[0] {
	case framePaired:
		return decodePaired(frame)
	case frameError:
		return PairAnswer{}, decodeError(frame)
	}
	return PairAnswer{}, fmt.Errorf("%w: frame type %#x in pair answer", errProtocol, frame[0])
}

func appendPaired(b []byte, a PairAnswer) []byte {
	msg := a.Message
	if len(msg) > maxPairMsg {
		msg = msg[:maxPairMsg]
	}
	ok := byte(0)
	if a.OK {
		ok = 1
	}
	b = append(b, framePaired, ok)
	b = binary.AppendUvarint(b, uint64(max(a.Claims, 0)))
	b = binary.AppendUvarint(b, uint64(len(msg)))
	return append(b, msg...)
}

func decodePaired(frame []byte) (PairAnswer, error) {
	d := dec{b: frame[1:]}
	ok := d.byte()
	if d.err == nil && ok > 1 {
		d.fail("ok byte %d", ok)
	}
	claims := d.uvarint()
	l := d.uvarint()
	if d.err == nil && l > maxPairMsg {
		d.fail("message of %d bytes (at most %d)", l, maxPairMsg)
	}
	msg := d.bytes(int(min(l, maxPairMsg)))
	if err := d.done(); err != nil {
		return PairAnswer{}, err
	}
	return PairAnswer{OK: ok == 1, Claims: int64(min(claims, 1<<62)), Message: string(msg)}, nil
}

func decodePair(frame []byte) ([]byte, error) {
	d := dec{b: frame[1:]}
	n := d.uvarint()
	if d.err == nil && (n == 0 || n > MaxPairToken) {
		d.fail("token of %d bytes (1..%d)", n, MaxPairToken)
	}
	tok := d.bytes(int(n))
	if err := d.done(); err != nil {
		return nil, err
	}
	return append([]byte(nil), tok...), nil
}

// servePair answers one PAIR request through Config.OnPair.
func (s *Swarm) servePair(ctx context.Context, st network.Stream) {
	p := st.Conn().RemotePeer()
	if s.penalties.isBlocked(p) { // its connection is being closed
		_ = st.Reset()
		return
	}
	frame, err := newRequestReader(st, maxPairFrame).next()
	if err == nil && frame[0] != framePair {
		err = fmt.Errorf("%w: expected PAIR", errProtocol)
	}
	var token []byte
	if err == nil {
		token, err = decodePair(frame)
	}
	if err != nil {
		s.log.Debug("bad pair request", "peer", p, "err", err)
		s.refuse(st, errCodeProtocol, "expected one PAIR frame")
		return
	}
	uid, err := PeerUID(p)
	if err != nil {
		s.refuse(st, errCodeProtocol, "peer key is not secp256k1: a metanode's peer id is its node uid")
		return
	}
	ans := PairAnswer{Message: "this node takes no pairing requests"}
	if s.cfg.OnPair != nil {
		ans = s.cfg.OnPair(ctx, uid, token)
	}
	if ans.OK {
		s.host.ConnManager().Protect(p, "paired")
		s.log.Info("paired", "peer", p, "uid", uid)
	} else {
		s.log.Info("pairing refused", "peer", p, "uid", uid, "reason", ans.Message)
	}
	fw := newFrameWriter(st)
	if fw.write(appendPaired(nil, ans)) != nil || fw.flush() != nil {
		_ = st.Reset()
		return
	}
	_ = st.Close()
}

// PeerUID is the node uid of a metanode peer: the uid of its secp256k1
// host key.
func PeerUID(p peer.ID) (string, error) {
	pub, err := p.ExtractPublicKey()
	if err != nil {
		return "", fmt.Errorf("peer uid: %w", err)
	}
	raw, err := pub.Raw()
	if err != nil {
		return "", fmt.Errorf("peer uid: %w", err)
	}
	pk, err := secp256k1.ParsePubKey(raw)
	if err != nil {
		return "", fmt.Errorf("peer uid: %w", err)
	}
	return store.UIDFromPubKey(pk), nil
}
