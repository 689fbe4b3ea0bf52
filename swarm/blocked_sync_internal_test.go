package swarm

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
)

// TestSync_BlockedPeerRefused: until its connection is closed, a blocked
// peer's new sync sessions are refused unanswered. The peer is blocked
// without a kick here, so it stays connected. (Review 3, D10.)
func TestSync_BlockedPeerRefused(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	s := mockSwarm(t, mn, 3)
	att := connectedPeer(t, mn, s.host.ID())
	// One turn, HELLO and END: a peer in good standing gets the
	// responder's HELLO back.
	session := func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		st, err := att.NewStream(ctx, s.host.ID(), ProtocolSync)
		if err != nil {
			return err
		}
		defer st.Reset()
		fw := newFrameWriter(st)
		if err := fw.write(appendHello(nil, hello{version: protoVersion})); err != nil {
			return err
		}
		if err := fw.write([]byte{frameEnd}); err != nil {
			return err
		}
		if err := fw.flush(); err != nil {
			return err
		}
		_, err = newFrameReader(st).next()
		return err
	}
	if err := session(); err != nil {
		t.Fatalf("setup: a session of a peer in good standing: %v", err)
	}
	now := time.Now()
	s.penalties.strike(att.ID(), now)
	s.penalties.strike(att.ID(), now)
	if s.host.Network().Connectedness(att.ID()) != network.Connected {
		t.Fatal("setup: the blocked peer was disconnected")
	}
	if err := session(); err == nil {
		t.Fatal("a blocked peer's sync session was served")
	}
}
