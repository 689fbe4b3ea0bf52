package swarm_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

func frame(b ...byte) []byte {
	return append(binary.AppendUvarint(nil, uint64(len(b))), b...)
}

// Garbage and oversized frames on every stream protocol never crash a
// node: it drops the stream, and a well-behaved peer syncs right after.
func TestGarbage_StreamProtocols(t *testing.T) {
	mn := newMocknet(t)
	victim := newNode(t, nodeOpt{mn: mn})
	w, _ := store.GenerateSigner()
	victim.submit(t, signMany(w, 0, 20, uint64(time.Now().UnixMilli())-1000))
	attacker := attackerOf(t, mn, victim)
	r := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	hello := frame(1, 1, 0, 5)
	inputs := map[string][]byte{
		"random bytes":          random,
		"oversized length":      {0xff, 0xff, 0xff, 0x7f},
		"huge length":           {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"empty frame":           {0},
		"unknown frame type":    frame(0x77, 1, 2, 3),
		"claims before hello":   frame(2, 1, 0),
		"hello twice":           append(append(hello, hello...), frame(5)...),
		"bad version":           frame(1, 9, 0, 0),
		"ranges not increasing": append(append([]byte{}, hello...), frame(4, 2, 5, 0, 0, 1, 0, 0)...),
		"lying list count":      append(append([]byte{}, hello...), frame(4, 0xff, 0xff, 0x03)...),
		"garbage claims":        append(append([]byte{}, hello...), frame(2, 3, 1, 2, 3, 4)...),
		"want flood":            append(append([]byte{}, hello...), frame(3, 0xff, 0xff, 0xff, 0x0f)...),
		"empty wants":           append(append([]byte{}, hello...), bytes.Repeat(frame(3, 0), 100)...),
		"empty ranges":          append(append([]byte{}, hello...), bytes.Repeat(frame(4, 0), 100)...),
		"truncated frame":       append(append([]byte{}, hello...), 0x40, 1, 2),
		"fetch of nothing":      frame(0x10, 0),
		"fetch of too many":     append(frame(0x10), bytes.Repeat([]byte{1, 'x'}, 300)...),
		"pair empty token":      frame(0x20, 0),
		"pair token too long":   frame(append([]byte{0x20, 0x81, 0x02}, bytes.Repeat([]byte{'t'}, 257)...)...),
		"pair lying length":     frame(0x20, 9, 't'),
	}
	for name, in := range inputs {
		for _, proto := range []protocol.ID{swarm.ProtocolSync, swarm.ProtocolFetch, swarm.ProtocolPair} {
			sendGarbage(t, attacker, victim, proto, in, name)
		}
	}
	// The node still serves: a fresh peer syncs everything.
	peer := newNode(t, nodeOpt{mn: mn})
	linkConnect(t, mn, victim, peer)
	waitSame(t, 20*time.Second, 20, victim, peer)
}

// sendGarbage writes in on a new stream and waits for the victim to end
// the stream (reset or close) within a bound.
func sendGarbage(t *testing.T, from host.Host, to *node, proto protocol.ID, in []byte, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := from.NewStream(ctx, to.id, proto)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = st.Reset() })
	defer stop()
	_, _ = st.Write(in)
	_ = st.CloseWrite()
	// Whatever the victim answers (an ERROR frame, nothing), the stream ends.
	if _, err := io.Copy(io.Discard, io.LimitReader(st, 1<<20)); err != nil && ctx.Err() != nil {
		t.Fatalf("%s on %s: the node kept the stream open", name, proto)
	}
	if ctx.Err() != nil {
		t.Fatalf("%s on %s: the node kept the stream open", name, proto)
	}
	_ = st.Close()
}
