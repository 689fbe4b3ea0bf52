package swarm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"
)

// TestFrameReader_PrefixAloneAllocatesLittle: a length prefix announcing a
// whole frame, with one byte behind it, must not make the node allocate
// the frame (review s12 A1: fetch and pair streams are read before any
// slot is taken, so a peer held thousands of such streams, 1 MiB each).
func TestFrameReader_PrefixAloneAllocatesLittle(t *testing.T) {
	for _, c := range []struct {
		name string
		size uint64
		open func(*bytes.Reader) *frameReader
	}{
		{"session", maxFrame, func(r *bytes.Reader) *frameReader { return newFrameReader(r) }},
		{"fetch request", maxFetchFrame, func(r *bytes.Reader) *frameReader { return newRequestReader(r, maxFetchFrame) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := append(binary.AppendUvarint(nil, c.size), frameFetch) // then EOF
			const n = 32
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for range n {
				if _, err := c.open(bytes.NewReader(in)).next(); err == nil {
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

// TestFrameReader_RequestCap: a request frame larger than the request can
// be is refused from its prefix, as a protocol violation; one at the cap
// reads whole (the buffer grows to it).
func TestFrameReader_RequestCap(t *testing.T) {
	over := binary.AppendUvarint(nil, maxPairFrame+1)
	if _, err := newRequestReader(bytes.NewReader(over), maxPairFrame).next(); !errors.Is(err, errProtocol) {
		t.Fatalf("a %d-byte pair request: %v, want a protocol violation", maxPairFrame+1, err)
	}
	body := bytes.Repeat([]byte{7}, maxFetchFrame)
	in := append(binary.AppendUvarint(nil, maxFetchFrame), body...)
	got, err := newRequestReader(bytes.NewReader(in), maxFetchFrame).next()
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("a %d-byte request read %d bytes, %v", maxFetchFrame, len(got), err)
	}
}
