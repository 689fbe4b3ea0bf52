package node

import (
	"context"
	"time"
)

// ReconcileTrust runs one check of the trust list against the node's own
// vouches and returns how many uids it changed.
func ReconcileTrust(ctx context.Context, n *Node) (int, error) { return n.reconcileTrust(ctx) }

// SetTrustCheckEvery sets the period of that check; call it before Open.
func SetTrustCheckEvery(n *Node, d time.Duration) { n.trustEvery = d }
