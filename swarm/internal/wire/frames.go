package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/metanode/metanode/store"
)

// ClaimsFrameFill is how much a CLAIMS frame holds before it is flushed.
const ClaimsFrameFill = 256 << 10

// MinWireClaim is a lower bound on one claim's wire size: a length byte,
// the magic, three one-byte lengths, kind, ts and signature.
const MinWireClaim = 1 + 6 + 3 + 1 + 8 + store.SigBytes

// ClaimsFrame accumulates claims in wire form into one CLAIMS frame.
type ClaimsFrame struct {
	b []byte
	n int
}

// Add appends one claim.
func (cf *ClaimsFrame) Add(c *store.Claim) { cf.b = c.AppendWire(cf.b); cf.n++ }

// Len is how many claims the frame holds.
func (cf *ClaimsFrame) Len() int { return cf.n }

// Size is the frame's claim bytes so far.
func (cf *ClaimsFrame) Size() int { return len(cf.b) }

// Bytes returns the frame: type, count, claims.
func (cf *ClaimsFrame) Bytes() []byte {
	out := make([]byte, 0, 1+binary.MaxVarintLen64+len(cf.b))
	out = append(out, Claims)
	out = binary.AppendUvarint(out, uint64(cf.n))
	return append(out, cf.b...)
}

// Reset empties the frame for reuse.
func (cf *ClaimsFrame) Reset() { cf.b, cf.n = cf.b[:0], 0 }

// DecodeClaims decodes a CLAIMS frame body (after the type byte) or a
// gossip batch body: a count of 1 to max, then the claims. Each claim must
// be canonical; nothing else is checked here.
func DecodeClaims(body []byte, max int) ([]store.Claim, error) {
	d := NewDec(body)
	n := d.Count(MinWireClaim)
	if d.err != nil {
		return nil, d.err
	}
	if n == 0 || n > max {
		return nil, fmt.Errorf("%w: %d claims in one frame (1..%d)", ErrProtocol, n, max)
	}
	claims := make([]store.Claim, 0, n)
	b := d.b
	for range n {
		c, used, err := store.DecodeWire(b)
		if err != nil {
			return nil, fmt.Errorf("%w: claim %d: %w", ErrProtocol, len(claims), err)
		}
		claims = append(claims, c)
		b = b[used:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes after claims", ErrProtocol, len(b))
	}
	return claims, nil
}

// EndFrame is the END frame: the end of a turn or of an answer.
func EndFrame() []byte { return []byte{End} }

// Error codes of an ERROR frame.
const (
	CodeBusy     = 1 // too many sessions, or the peer's budget is spent; try later
	CodeNotReady = 2 // the sync set is still loading
	CodeInternal = 3
	CodeProtocol = 4
)

// maxErrorMsg bounds an ERROR frame's message.
const maxErrorMsg = 256

// RemoteError is an ERROR frame received from the peer.
type RemoteError struct {
	Code uint64
	Msg  string
}

func (e *RemoteError) Error() string { return fmt.Sprintf("peer error %d: %s", e.Code, e.Msg) }

// AppendError encodes an ERROR frame (the message cut to 256 bytes).
func AppendError(b []byte, code uint64, msg string) []byte {
	if len(msg) > maxErrorMsg {
		msg = msg[:maxErrorMsg]
	}
	b = append(b, Error)
	b = binary.AppendUvarint(b, code)
	b = binary.AppendUvarint(b, uint64(len(msg)))
	return append(b, msg...)
}

// DecodeError decodes an ERROR frame into a *RemoteError (or a protocol
// violation when malformed).
func DecodeError(frame []byte) error {
	d := NewDec(frame[1:])
	code := d.Uvarint()
	msg := d.Bytes(int(min(d.Uvarint(), 1024)))
	if err := d.Done(); err != nil {
		return err
	}
	return &RemoteError{Code: code, Msg: string(msg)}
}

// IsBusy reports whether err is a peer's ERROR busy.
func IsBusy(err error) bool {
	var re *RemoteError
	return errors.As(err, &re) && re.Code == CodeBusy
}
