package swarm_test

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestConnect_BothWaysAtOnce: two nodes dialing each other at the same
// moment (mDNS makes both do so on a LAN) may meet in a TCP simultaneous
// open, whose handshake fails as a wrong swarm key would. Connect must
// still succeed, and nothing may be reported as a key mismatch.
func TestConnect_BothWaysAtOnce(t *testing.T) {
	a, b := newNode(t, nodeOpt{}), newNode(t, nodeOpt{})
	for round := range 30 {
		_ = a.sw.Host().Network().ClosePeer(b.id)
		_ = b.sw.Host().Network().ClosePeer(a.id)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		wg.Go(func() { errs[0] = a.sw.Connect(ctx, b.sw.Addrs()[0]) })
		wg.Go(func() { errs[1] = b.sw.Connect(ctx, a.sw.Addrs()[0]) })
		wg.Wait()
		cancel()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, dialer %d: %v", round, i, err)
			}
		}
	}
	for _, n := range []*node{a, b} {
		if errs := n.sw.Status().Errors; len(errs) > 0 {
			t.Fatalf("status errors after simultaneous dials: %q", errs)
		}
	}
}
