package swarm

import (
	"strings"

	"github.com/metanode/metanode/store"
)

// packGossip cuts queued Publish calls into gossip messages of at most
// maxGossipClaims claims and maxGossipBytes of data. A call is kept in one
// message whenever it fits: a vouch and the claims it admits are published
// in one call (the node's first write of a new local writer, a relay of
// front-run claims), and a peer validates messages concurrently, so a
// claim that travels apart from its vouch may be checked before the vouch
// is stored and refused. A call too big for one message is split, and its
// vouches lead every part: each part then admits its own claims (a peer
// holding the vouch already skips the copy as known).
func packGossip(calls [][]store.Claim) [][]store.Claim {
	var msgs [][]store.Claim
	var cur []store.Claim
	bytes := 0
	emit := func() {
		if len(cur) > 0 {
			msgs = append(msgs, cur)
		}
		cur, bytes = nil, 0
	}
	fits := func(n, b int) bool { return n <= maxGossipClaims && b <= maxGossipBytes-16 }
	for _, call := range calls {
		size := wireSize(call)
		if !fits(len(cur)+len(call), bytes+size) {
			emit()
		}
		if fits(len(call), size) {
			cur = append(cur, call...)
			bytes += size
			continue
		}
		// Too big for one message: split, the vouches leading each part.
		var vouches, rest []store.Claim
		for _, c := range call {
			if strings.HasPrefix(c.Key, store.VouchPrefix) {
				vouches = append(vouches, c)
			} else {
				rest = append(rest, c)
			}
		}
		if !fits(len(vouches)+1, wireSize(vouches)+maxClaimWire(rest)) {
			vouches, rest = nil, call // vouches alone fill a message: plain split
		}
		head := wireSize(vouches)
		for len(rest) > 0 {
			cur, bytes = append(cur, vouches...), head
			n := 0
			for n < len(rest) {
				w := len(rest[n].Wire())
				if n > 0 && !fits(len(cur)+1, bytes+w) {
					break
				}
				cur, bytes = append(cur, rest[n]), bytes+w
				n++
			}
			rest = rest[n:]
			emit()
		}
	}
	emit()
	return msgs
}

func wireSize(claims []store.Claim) int {
	n := 0
	for i := range claims {
		n += len(claims[i].Wire())
	}
	return n
}

func maxClaimWire(claims []store.Claim) int {
	m := 0
	for i := range claims {
		m = max(m, len(claims[i].Wire()))
	}
	return m
}
