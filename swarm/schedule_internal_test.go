package swarm

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"github.com/metanode/metanode/store/storetest"
)

// "Catch-up starts within a second of a connection" (spec/swarm.md
// promise 2), in virtual time: in a synctest bubble the scheduler is told
// of a new connection, one virtual second passes, and the session with
// that peer must have started by then, with its interest fetch. Periodic
// rounds are an hour apart and the peer joins no topic, so only the
// connection trigger can start it. The peer with the lower id starts the
// session: the other side starts none.
func TestSchedule_CatchUpWithinASecondOfConnection(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	h, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	const promise = time.Second
	above, below := peer.ID("\xff"), peer.ID("\x00") // peer ids above and below the host's
	synctest.Test(t, func(t *testing.T) {
		type session struct {
			p        peer.ID
			interest bool
		}
		sessions := make(chan session, 8)
		s := &Swarm{host: h, log: storetest.Logger(t, 8), cfg: Config{SyncInterval: time.Hour},
			connCh: make(chan peer.ID, 2), joinCh: make(chan peer.ID, 1),
			cascadeCh: make(chan peer.ID, 1), resyncCh: make(chan struct{}, 1)}
		s.sessionRun = func(_ context.Context, _ slots, p peer.ID, interest bool) bool {
			sessions <- session{p: p, interest: interest}
			return true
		}
		ctx, cancel := context.WithCancel(t.Context())
		stopped := make(chan struct{})
		go func() { defer close(stopped); s.runSyncScheduler(ctx) }()

		s.connCh <- below
		s.connCh <- above
		time.Sleep(promise)
		synctest.Wait()
		cancel()
		<-stopped
		close(sessions)
		var got []session
		var with []string
		for se := range sessions {
			got = append(got, se)
			with = append(with, se.p.String())
		}
		if len(got) != 1 || got[0].p != above {
			t.Fatalf("sessions within %v of the connections: with %q; want one, with %s (the peer above this node's id)", promise, with, above)
		}
		if !got[0].interest {
			t.Error("the connection's session has no interest fetch")
		}
	})
}
