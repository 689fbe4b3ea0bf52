package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/metanode/metanode/swarm/internal/wire"
)

func TestReader_Limits(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	fw := wire.NewWriter(&buf)
	if err := fw.Write(wire.EndFrame()); err != nil {
		t.Fatal(err)
	}
	if err := fw.Write(make([]byte, wire.MaxFrame+1)); err == nil {
		t.Fatal("oversized frame written")
	}
	if err := fw.Flush(); err != nil {
		t.Fatal(err)
	}
	// An oversized length prefix is refused before anything is allocated.
	buf.Write([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	fr := wire.NewReader(&buf)
	if f, err := fr.Next(); err != nil || !bytes.Equal(f, wire.EndFrame()) {
		t.Fatalf("first frame: %x, %v", f, err)
	}
	if _, err := fr.Next(); !errors.Is(err, wire.ErrProtocol) {
		t.Fatalf("oversized frame: %v, want a protocol violation", err)
	}
	// A truncated frame is an unexpected EOF, a clean end is EOF.
	fr = wire.NewReader(bytes.NewReader([]byte{5, 1, 2}))
	if _, err := fr.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated: %v", err)
	}
	fr = wire.NewReader(bytes.NewReader(nil))
	if _, err := fr.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("empty: %v", err)
	}
	fr = wire.NewReader(bytes.NewReader([]byte{0}))
	if _, err := fr.Next(); !errors.Is(err, wire.ErrProtocol) {
		t.Fatalf("zero-length frame: %v", err)
	}
}

// Request caps of the fetch and pair protocols (swarm/fetch.go, pair.go).
const (
	fetchRequestMax = 1 + 2 + 256*(2+1019)
	pairRequestMax  = 1 + 2 + 256
)

// TestReader_PrefixAloneAllocatesLittle: a length prefix announcing a
// whole frame, with one byte behind it, must not make the node allocate
// the frame: fetch and pair streams are read before any slot is taken, so
// a peer may hold thousands of such streams.
func TestReader_PrefixAloneAllocatesLittle(t *testing.T) {
	for _, c := range []struct {
		name string
		size uint64
		open func(*bytes.Reader) *wire.Reader
	}{
		{"session", wire.MaxFrame, func(r *bytes.Reader) *wire.Reader { return wire.NewReader(r) }},
		{"fetch request", fetchRequestMax, func(r *bytes.Reader) *wire.Reader { return wire.NewRequestReader(r, fetchRequestMax) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := append(binary.AppendUvarint(nil, c.size), wire.Fetch) // then EOF
			const n = 32
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for range n {
				if _, err := c.open(bytes.NewReader(in)).Next(); err == nil {
					t.Fatal("a truncated frame read as whole")
				}
			}
			runtime.ReadMemStats(&after)
			if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 80<<10 {
				t.Fatalf("a %d-byte prefix with 1 byte behind it allocated %d bytes", c.size, per)
			}
		})
	}
}

// TestReader_RequestCap: a request frame larger than the request can be is
// refused from its prefix, as a protocol violation; one at the cap reads
// whole (the buffer grows to it).
func TestReader_RequestCap(t *testing.T) {
	t.Parallel()
	over := binary.AppendUvarint(nil, pairRequestMax+1)
	if _, err := wire.NewRequestReader(bytes.NewReader(over), pairRequestMax).Next(); !errors.Is(err, wire.ErrProtocol) {
		t.Fatalf("a %d-byte pair request: %v, want a protocol violation", pairRequestMax+1, err)
	}
	body := bytes.Repeat([]byte{7}, fetchRequestMax)
	in := append(binary.AppendUvarint(nil, fetchRequestMax), body...)
	got, err := wire.NewRequestReader(bytes.NewReader(in), fetchRequestMax).Next()
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("a %d-byte request read %d bytes, %v", fetchRequestMax, len(got), err)
	}
}

// TestError_RoundTrip: an ERROR frame carries its code and a message cut
// to 256 bytes; IsBusy names code 1.
func TestError_RoundTrip(t *testing.T) {
	t.Parallel()
	long := string(bytes.Repeat([]byte{'x'}, 300))
	err := wire.DecodeError(wire.AppendError(nil, wire.CodeBusy, long))
	var re *wire.RemoteError
	if !errors.As(err, &re) || re.Code != wire.CodeBusy || len(re.Msg) != 256 || !wire.IsBusy(err) {
		t.Fatalf("decoded %v", err)
	}
	if wire.IsBusy(wire.DecodeError(wire.AppendError(nil, wire.CodeNotReady, ""))) {
		t.Fatal("not ready read as busy")
	}
}

func FuzzDecodeError(f *testing.F) {
	f.Add(wire.AppendError(nil, wire.CodeProtocol, "bad"))
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) == 0 {
			return
		}
		var re *wire.RemoteError
		if err := wire.DecodeError(frame); errors.As(err, &re) {
			if !bytes.Equal(wire.AppendError(nil, re.Code, re.Msg)[1:], frame[1:]) && len(re.Msg) <= 256 {
				t.Fatal("re-encoding differs")
			}
		}
	})
}
