package reconcile

import (
	"encoding/binary"
	"fmt"

	"github.com/metanode/metanode/swarm/internal/wire"
)

// Version is the sync protocol version HELLO carries.
const Version = 1

// Session flags carried by HELLO.
const (
	// FlagNoPush: do not send me claims (an interest-mode node keeps only
	// claims about its own cids and fetches those itself).
	FlagNoPush uint64 = 1 << 0
	// FlagSketch: I read Sketch ranges; without it a peer gets
	// fingerprints and id lists only.
	FlagSketch uint64 = 1 << 1
)

// Hello opens each side's first turn.
type Hello struct {
	Version uint64
	Flags   uint64
	SetLen  uint64 // items in the sender's set: a hint for logs
}

// AppendHello encodes a HELLO frame.
func AppendHello(b []byte, h Hello) []byte {
	b = append(b, wire.Hello)
	b = binary.AppendUvarint(b, h.Version)
	b = binary.AppendUvarint(b, h.Flags)
	return binary.AppendUvarint(b, h.SetLen)
}

// DecodeHello decodes a HELLO frame: another version, or any byte after
// SetLen, is a violation (HELLO grows only by flag bits).
func DecodeHello(frame []byte) (Hello, error) {
	d := wire.NewDec(frame[1:])
	h := Hello{Version: d.Uvarint(), Flags: d.Uvarint(), SetLen: d.Uvarint()}
	if err := d.Done(); err != nil {
		return Hello{}, err
	}
	if h.Version != Version {
		return Hello{}, fmt.Errorf("%w: version %d, want %d", wire.ErrProtocol, h.Version, Version)
	}
	return h, nil
}
