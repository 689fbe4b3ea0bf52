package swarm_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

// Peers that follow the frame format but not its spirit: each attack is
// cut off early, and costs the node a bounded amount.

// TestSync_EndlessRangesRefused: RANGES frames that never reach END (each
// 3-byte skip entry decodes to a ~100-byte range) are refused past the
// per-turn limit instead of being buffered.
func TestSync_EndlessRangesRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mn := newMocknet(t)
	st := rawSyncStream(ctx, t, mn, newNode(t, nodeOpt{mn: mn}))
	if _, err := st.Write(frame(1, 1, 0, 0)); err != nil { // HELLO
		t.Fatal(err)
	}
	// One frame of skip entries, each one millisecond past the last.
	const perFrame = 100_000
	body := []byte{4}
	body = binary.AppendUvarint(body, perFrame)
	for range perFrame {
		body = append(body, 2, 0, 0)
	}
	f := append(binary.AppendUvarint(nil, uint64(len(body))), body...)
	sent := 0
	for ; sent < 40<<20; sent += len(f) {
		if _, err := st.Write(f); err != nil {
			break // the victim reset the stream
		}
	}
	// Whatever was buffered, the victim ends the stream.
	_, _ = io.Copy(io.Discard, io.LimitReader(st, 1<<20))
	if ctx.Err() != nil || sent >= 40<<20 {
		t.Fatalf("the victim took %d bytes of ranges in one turn", sent)
	}
	t.Logf("cut off after %d bytes", sent)
}

// TestSync_RepeatedWantsAnsweredOnce: a peer asking for the same claim in
// many WANT frames of one turn gets it once.
func TestSync_RepeatedWantsAnsweredOnce(t *testing.T) {
	mn := newMocknet(t)
	victim := newNode(t, nodeOpt{mn: mn})
	w, _ := store.GenerateSigner()
	claims := signMany(w, 0, 1, uint64(time.Now().UnixMilli())-1000)
	victim.submit(t, claims)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := rawSyncStream(ctx, t, mn, victim)
	id := claims[0].ID()
	want := append(binary.AppendUvarint([]byte{3, 1}, claims[0].TS), id[:6]...)
	in := frame(1, 1, 0, 0)
	for range 50 {
		in = append(in, frame(want...)...)
	}
	in = append(in, frame(5)...)
	if _, err := st.Write(in); err != nil {
		t.Fatal(err)
	}
	_ = st.SetReadDeadline(time.Now().Add(20 * time.Second))
	got := claimsUntilEnd(t, st)
	if got != 1 {
		t.Fatalf("the claim asked for 50 times came back %d times", got)
	}
}

// rawSyncStream opens a sync stream to victim from a bare attacker host;
// it is reset when ctx ends or the test does.
func rawSyncStream(ctx context.Context, t *testing.T, mn mocknet.Mocknet, victim *node) network.Stream {
	t.Helper()
	st, err := attackerOf(t, mn, victim).NewStream(ctx, victim.id, swarm.ProtocolSync)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Reset() })
	context.AfterFunc(ctx, func() { _ = st.Reset() })
	return st
}

// claimsUntilEnd reads a sync or fetch answer up to END and counts the
// claims of its CLAIMS frames.
func claimsUntilEnd(t *testing.T, st network.Stream) int {
	t.Helper()
	r := bufio.NewReader(st)
	n := 0
	for range 10_000 {
		size, err := binary.ReadUvarint(r)
		if err != nil {
			t.Fatalf("read answer: %v", err)
		}
		b := make([]byte, size)
		if _, err := io.ReadFull(r, b); err != nil {
			t.Fatalf("read answer: %v", err)
		}
		switch b[0] {
		case 2:
			k, _ := binary.Uvarint(b[1:])
			n += int(k)
		case 5:
			return n
		}
	}
	t.Fatal("no END")
	return 0
}

// TestFetch_AnswerBytesBounded: a peer answering a fetch with claims far
// past any record's size (here 70 MiB of one big claim, repeated) is cut
// off at the byte limit, before it is all held in memory.
func TestFetch_AnswerBytesBounded(t *testing.T) {
	mn := newMocknet(t)
	victim := newNode(t, nodeOpt{mn: mn})
	attacker := attackerOf(t, mn, victim)
	w, _ := store.GenerateSigner()
	big := w.Text(testCID(1), "title", strings.Repeat("x", store.MaxValueBytes-64), uint64(time.Now().UnixMilli()))
	wire := big.Wire()
	per := (1 << 20) / len(wire)
	body := binary.AppendUvarint([]byte{2}, uint64(per))
	body = append(body, bytes.Repeat(wire, per)...)
	claimsFrame := append(binary.AppendUvarint(nil, uint64(len(body))), body...)
	sentAll := make(chan bool, 1)
	attacker.SetStreamHandler(swarm.ProtocolFetch, func(st network.Stream) {
		defer st.Reset()
		_, _ = io.Copy(io.Discard, io.LimitReader(st, 1<<16)) // the request
		for sent := 0; sent < 70<<20; sent += len(claimsFrame) {
			if _, err := st.Write(claimsFrame); err != nil {
				sentAll <- false
				return
			}
		}
		_, err := st.Write(frame(5))
		sentAll <- err == nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := victim.sw.FetchFrom(ctx, attacker.ID(), []string{testCID(1)})
	if err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Fatalf("fetch of a 70 MiB answer: %v, want the byte limit", err)
	}
	select {
	case all := <-sentAll:
		if all {
			t.Fatal("the victim read the whole 70 MiB answer")
		}
	case <-ctx.Done():
		t.Fatal("the attacker's writes neither failed nor finished")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("fetch timed out instead of refusing: %v", err)
	}
}

// TestSync_IdlePeerCutOff: a peer that opens a session and then says
// nothing loses it after the idle limit, on every transport (mocknet
// streams ignore deadlines, so only the session's own guard can end it).
func TestSync_IdlePeerCutOff(t *testing.T) {
	mn := newMocknet(t)
	victim := newNode(t, nodeOpt{mn: mn, noOpen: true})
	victim.sw.SetSessionLimits(300*time.Millisecond, time.Hour, 1, time.Hour)
	victim.open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := rawSyncStream(ctx, t, mn, victim)
	if _, err := st.Write(frame(1, 1, 0, 0)); err != nil { // HELLO, then silence
		t.Fatal(err)
	}
	_, err := io.Copy(io.Discard, st)
	if ctx.Err() != nil {
		t.Fatal("an idle session was kept open")
	}
	if err == nil {
		t.Fatal("the victim ended an idle session cleanly; want a reset")
	}
	waitFor(t, 10*time.Second, "the slot to be freed", func() bool { return victim.sw.InboundSessions(attackerPeer(st)) == 0 })
}

// TestSync_TricklingPeerCutOff: a peer that keeps a session alive with a
// small frame now and then (never idle) still loses it once the session
// outlives what the bytes it moved allow.
func TestSync_TricklingPeerCutOff(t *testing.T) {
	mn := newMocknet(t)
	victim := newNode(t, nodeOpt{mn: mn, noOpen: true})
	// Idle 2 s, lifetime 1 s plus a second per MiB moved.
	victim.sw.SetSessionLimits(2*time.Second, time.Second, 1<<20, time.Hour)
	victim.open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := rawSyncStream(ctx, t, mn, victim)
	if _, err := st.Write(frame(1, 1, 0, 0)); err != nil {
		t.Fatal(err)
	}
	cut := make(chan struct{})
	go func() { // the victim ends the stream: reads fail
		defer close(cut)
		_, _ = io.Copy(io.Discard, st)
	}()
	sent := 0
trickle:
	for ; sent < 200; sent++ { // 20 s at most
		want := append(binary.AppendUvarint([]byte{3, 1}, uint64(sent)), 1, 2, 3, 4, 5, 6)
		if _, err := st.Write(frame(want...)); err != nil {
			break
		}
		select {
		case <-cut:
			break trickle
		case <-time.After(100 * time.Millisecond):
		}
	}
	<-cut
	if ctx.Err() != nil || sent >= 200 {
		t.Fatalf("a trickling peer kept its session through %d frames", sent)
	}
	waitFor(t, 10*time.Second, "the slot to be freed", func() bool { return victim.sw.InboundSessions(attackerPeer(st)) == 0 })
	t.Logf("cut off after %d frames", sent)
}

func attackerPeer(st network.Stream) peer.ID { return st.Conn().LocalPeer() }
