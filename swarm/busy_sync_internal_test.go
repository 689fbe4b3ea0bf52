package swarm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"github.com/metanode/metanode/store"
)

// TestSyncWith_BusyPeerIsAskedAgain: a peer whose sessions with this node
// are all taken refuses a new one with ERROR busy and closes the stream.
// SyncWith reports that as the peer's busy error (not the write that failed
// against the closed stream: CI, TestSync_TrustLater), and once a slot is
// free asks again and succeeds.
func TestSyncWith_BusyPeerIsAskedAgain(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	// No sessions of their own: only the held streams take the slots.
	quiet := func(c *Config) { c.NoAutoSync = true }
	e := openMockSwarm(t, mn, 105, "/ip4/10.1.0.6/tcp/4001", store.TrustOpen, nil, quiet)
	p := openMockSwarm(t, mn, 106, "/ip4/10.1.0.7/tcp/4001", store.TrustOpen, nil, quiet)
	if _, err := mn.LinkPeers(e.host.ID(), p.host.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := mn.ConnectPeers(e.host.ID(), p.host.ID()); err != nil {
		t.Fatal(err)
	}
	// Take the peer's sessions with e: streams that never finish their
	// hello (one byte of a frame's length: the handler is running).
	var held []network.Stream
	hold := func() {
		for range 8 {
			st, err := e.host.NewStream(t.Context(), p.host.ID(), ProtocolSync)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, st)
			if _, err := st.Write([]byte{5}); err != nil {
				t.Fatal(err)
			}
		}
	}
	release := func() {
		for _, st := range held {
			_ = st.Reset()
		}
		held = nil
	}
	t.Cleanup(release)
	hold()
	taken := func() bool {
		p.sessions.mu.Lock()
		defer p.sessions.mu.Unlock()
		return p.sessions.n[e.host.ID()] >= p.sessions.max
	}
	for deadline := time.Now().Add(10 * time.Second); !taken() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond) // no retry within it
	_, err := e.SyncWith(ctx, p.host.ID())
	cancel()
	var re *remoteError
	if !errors.As(err, &re) || re.code != errCodeBusy {
		t.Fatalf("sync with a busy peer: %v, want its ERROR busy", err)
	}

	// Asked again: freed after the first refusal, the session goes through.
	sessions := e.Counters().Sessions
	done := make(chan error, 1)
	go func() {
		_, err := e.SyncWith(t.Context(), p.host.ID())
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for e.Counters().Sessions == sessions && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sync once the peer had a free slot: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("SyncWith never returned")
	}
}
