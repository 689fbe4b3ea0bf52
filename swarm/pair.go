package swarm

import (
	"context"
	"errors"
)

// ProtocolPair is the stream protocol a joining node uses to present an
// invite token to the inviter (metanode invite / metanode join).
const ProtocolPair = "/metanode/pair/1.0.0"

// PairAnswer is the inviter's answer to a pairing request.
type PairAnswer struct {
	OK      bool
	Message string // why not, when refused; shown to the joining owner
	Claims  int64  // claims the inviter shares, so the joiner can show sync progress
}

// Pair connects to the inviter at addr (a multiaddr with /p2p/), presents
// token over ProtocolPair and returns the inviter's answer. The joiner's uid
// is its authenticated peer id: the inviter learns it from the connection.
func (s *Swarm) Pair(ctx context.Context, addr string, token []byte) (PairAnswer, error) {
	return PairAnswer{}, errPairNotImplemented
}

var errPairNotImplemented = errors.New("pairing is not implemented yet")

// ErrNotInterested marks a peer claim that the node's Store wrapper did not
// keep because it is not about a cid the node is interested in (interest
// replication). The swarm counts such results as neutral: neither refused
// nor held against the peer.
var ErrNotInterested = errors.New("not of interest: this node keeps claims about its own cids only")
