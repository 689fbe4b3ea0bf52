package swarm

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"github.com/metanode/metanode/store/storetest"
)

// "mDNS peers are dialed 4 at a time" (protocols.md): anyone on a LAN can
// announce peers whose address accepts TCP and stalls each dial for ~13 s.
// The connector is given 20 found peers whose dials block until released;
// in a synctest bubble, once every goroutine is blocked, exactly 4 dials
// are in flight (none queued behind a free slot, none
// past the bound), and each released dial lets one more start.
func TestConnector_FoundDialsBounded(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	h, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	const (
		found   = 20
		atATime = 4 // protocols.md: "mDNS peers are dialed 4 at a time"
	)
	synctest.Test(t, func(t *testing.T) {
		var inFlight, most, done atomic.Int64
		release := make(chan struct{})
		s := &Swarm{host: h, log: storetest.Logger(t, 8), penalties: newPenaltyBox(time.Minute),
			foundCh: make(chan peer.AddrInfo, found), kickCh: make(chan peer.ID, 1)}
		s.foundDial = func(ctx context.Context, _ peer.AddrInfo) error {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := most.Load(); n > m; m = most.Load() {
				if most.CompareAndSwap(m, n) {
					break
				}
			}
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			done.Add(1)
			return errors.New("no answer") // unreached: not remembered, not redialed
		}
		ctx, cancel := context.WithCancel(t.Context())
		stopped := make(chan struct{})
		go func() { defer close(stopped); s.runConnector(ctx) }()
		for i := range found {
			s.foundCh <- peer.AddrInfo{ID: peer.ID(fmt.Sprintf("lan-stranger-%02d", i))}
		}
		for released := 0; ; released++ {
			synctest.Wait()
			want := int64(min(atATime, found-released))
			if got := inFlight.Load(); got != want {
				t.Fatalf("%d of %d dials released: %d in flight, want %d", released, found, got, want)
			}
			if want == 0 {
				break
			}
			release <- struct{}{}
		}
		if done.Load() != found || most.Load() != atATime {
			t.Fatalf("%d dials done, at most %d at once; want %d and %d", done.Load(), most.Load(), found, atATime)
		}
		cancel()
		<-stopped
	})
}
