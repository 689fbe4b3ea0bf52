package reconcile_test

import (
	"bytes"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm/internal/wire"
	"github.com/metanode/metanode/swarm/reconcile"
)

func FuzzDecodeWant(f *testing.F) {
	f.Add(reconcile.AppendWant(nil, []reconcile.ShortID{{TS: 5}, {TS: 9, Pre: [reconcile.ShortIDBytes]byte{1}}}))
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) == 0 {
			return
		}
		w, err := reconcile.DecodeWant(frame)
		if err != nil {
			return
		}
		if !bytes.Equal(reconcile.AppendWant(nil, w)[1:], frame[1:]) {
			t.Fatal("re-encoding differs")
		}
	})
}

func FuzzDecodeHello(f *testing.F) {
	f.Add(reconcile.AppendHello(nil, reconcile.Hello{Version: reconcile.Version, Flags: reconcile.FlagNoPush, SetLen: 7}))
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) == 0 {
			return
		}
		h, err := reconcile.DecodeHello(frame)
		if err != nil {
			return
		}
		if h.Version != reconcile.Version {
			t.Fatal("wrong version accepted")
		}
		if !bytes.Equal(reconcile.AppendHello(nil, h)[1:], frame[1:]) {
			t.Fatal("re-encoding differs")
		}
	})
}

// TestHello_Flags: a side that wants no claims says so, and a peer that
// reads its HELLO pushes none; it sends sketches, which both read.
func TestHello_Flags(t *testing.T) {
	t.Parallel()
	a := reconcile.New(store.NewSyncSet(), nil, reconcile.DefaultParams)
	a.Want = false
	b := reconcile.New(store.NewSyncSet(), nil, reconcile.DefaultParams)
	f := reconcile.AppendHello(nil, a.Hello())
	if f[0] != wire.Hello {
		t.Fatalf("frame type %#x", f[0])
	}
	h, err := reconcile.DecodeHello(f)
	if err != nil {
		t.Fatal(err)
	}
	b.ApplyHello(h)
	if b.Push || !b.Sketch {
		t.Fatalf("after a no-push HELLO with sketches: push %v, sketch %v", b.Push, b.Sketch)
	}
}
