package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// Kind says what a claim's value is.
type Kind uint8

const (
	KindRetraction Kind = 0 // no value: a tombstone, stored and replicated
	KindText       Kind = 1 // UTF-8 text, merged
	KindCipher     Kind = 2 // opaque bytes, never merged, always replicated
)

func (k Kind) String() string {
	switch k {
	case KindRetraction:
		return "retraction"
	case KindText:
		return "text"
	case KindCipher:
		return "cipher"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Size limits of the MMUR2 format.
const (
	MaxValueBytes = 65536
	MaxKeyBytes   = 1024
	MaxUIDBytes   = 64 // a real uid is 45 or 46 bytes
	// MaxCIDBytes: claims.md sets no cid limit, but a link key cids/<cid>
	// is at most MaxKeyBytes, so every cid a link can name is a valid cid
	// (a url locator's cid passes 512 bytes with a url of ~313).
	MaxCIDBytes = 1019 // MaxKeyBytes - len(LinkPrefix)
	// MaxPayloadBytes bounds a decoded payload: every field at its limit.
	MaxPayloadBytes = 6 + 3*3 + MaxUIDBytes + MaxCIDBytes + MaxKeyBytes + 1 + 3 + MaxValueBytes + 8
	// MaxWireBytes bounds one claim in wire form.
	MaxWireBytes = 3 + MaxPayloadBytes + SigBytes
	SigBytes     = 64
)

var payloadMagic = []byte("MMUR2\x00") // 6 bytes, counted in MaxPayloadBytes

// ID is a claim id: SHA-256 of the canonical payload.
type ID [32]byte

func (id ID) String() string { return hex.EncodeToString(id[:]) }

// Compare orders ids bytewise.
func (id ID) Compare(o ID) int { return bytes.Compare(id[:], o[:]) }

// ParseID parses a lower-case hex claim id.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 64 {
		return id, fmt.Errorf("%w: id must be 64 hex characters", ErrMalformed)
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("%w: id: %v", ErrMalformed, err)
	}
	return id, nil
}

// Claim is one signer's vote on one field of one content id (MMUR2).
// Value holds the text bytes or the ciphertext; it is nil for a retraction.
type Claim struct {
	UID   string
	CID   string
	Key   string
	Kind  Kind
	Value []byte
	TS    uint64 // milliseconds since the Unix epoch; the claim's version
	Sig   [SigBytes]byte
}

// Text returns the value as a string (empty for a retraction).
func (c *Claim) Text() string { return string(c.Value) }

// AppendPayload appends the canonical signed bytes of c to b.
func (c *Claim) AppendPayload(b []byte) []byte {
	return appendPayload(b, c.UID, c.CID, c.Key, c.Kind, c.Value, c.TS)
}

// appendPayload appends the canonical signed bytes of a claim given by its
// fields: a Claim's, or a truth row's (value as a string).
func appendPayload[V string | []byte](b []byte, uid, cid, key string, kind Kind, value V, ts uint64) []byte {
	b = append(b, payloadMagic...)
	b = appendVarBytes(b, uid)
	b = appendVarBytes(b, cid)
	b = appendVarBytes(b, key)
	b = append(b, byte(kind))
	if kind != KindRetraction {
		b = appendVarBytes(b, value)
	}
	return binary.BigEndian.AppendUint64(b, ts)
}

// Payload returns the canonical signed bytes of c.
func (c *Claim) Payload() []byte {
	return c.AppendPayload(make([]byte, 0, c.payloadSize()))
}

func (c *Claim) payloadSize() int {
	n := len(payloadMagic) + 3*binary.MaxVarintLen32 + len(c.UID) + len(c.CID) + len(c.Key) + 1 + 8
	if c.Kind != KindRetraction {
		n += binary.MaxVarintLen32 + len(c.Value)
	}
	return n
}

// ID returns SHA-256 of the canonical payload. It does not cover the signature.
func (c *Claim) ID() ID {
	var buf [512]byte
	return sha256.Sum256(c.AppendPayload(buf[:0]))
}

// AppendWire appends the wire form varbytes(payload) ‖ sig to b.
func (c *Claim) AppendWire(b []byte) []byte {
	var buf [512]byte
	p := c.AppendPayload(buf[:0])
	b = appendVarBytes(b, p)
	return append(b, c.Sig[:]...)
}

// Wire returns the wire form of c.
func (c *Claim) Wire() []byte {
	return c.AppendWire(make([]byte, 0, c.payloadSize()+binary.MaxVarintLen32+SigBytes))
}

// DecodeWire decodes one claim in wire form from the front of b and returns it
// with the number of bytes it used. Only the canonical encoding is accepted, so
// the id computed from the decoded claim is the id of the bytes received. It
// checks the format, not the claim's validity (see Check and Verify).
func DecodeWire(b []byte) (Claim, int, error) {
	plen, n := binary.Uvarint(b)
	if n <= 0 {
		return Claim{}, 0, fmt.Errorf("%w: bad payload length", ErrMalformed)
	}
	if plen > uint64(MaxPayloadBytes) {
		return Claim{}, 0, fmt.Errorf("%w: payload of %d bytes exceeds %d", ErrMalformed, plen, MaxPayloadBytes)
	}
	end := n + int(plen)
	if len(b) < end+SigBytes {
		return Claim{}, 0, fmt.Errorf("%w: truncated claim", ErrMalformed)
	}
	c, err := DecodePayload(b[n:end])
	if err != nil {
		return Claim{}, 0, err
	}
	if n != uvarintLen(plen) {
		return Claim{}, 0, fmt.Errorf("%w: non-canonical length prefix", ErrMalformed)
	}
	copy(c.Sig[:], b[end:end+SigBytes])
	return c, end + SigBytes, nil
}

// DecodePayload decodes canonical payload bytes into a claim without signature.
func DecodePayload(p []byte) (Claim, error) {
	var c Claim
	if !bytes.HasPrefix(p, payloadMagic) {
		return c, fmt.Errorf("%w: not an MMUR2 payload", ErrMalformed)
	}
	r := reader{b: p[len(payloadMagic):]}
	c.UID = string(r.varBytes(MaxUIDBytes))
	c.CID = string(r.varBytes(MaxCIDBytes))
	c.Key = string(r.varBytes(MaxKeyBytes))
	c.Kind = Kind(r.byte())
	switch c.Kind {
	case KindRetraction:
	case KindText, KindCipher:
		v := r.varBytes(MaxValueBytes)
		c.Value = append(make([]byte, 0, len(v)), v...)
	default:
		if r.err == nil {
			r.err = fmt.Errorf("unknown value kind %d", c.Kind)
		}
	}
	c.TS = r.uint64()
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d trailing bytes", len(r.b))
	}
	if r.err != nil {
		return Claim{}, fmt.Errorf("%w: %v", ErrMalformed, r.err)
	}
	// Re-encoding must give back the same bytes: varints are canonical.
	if !bytes.Equal(c.Payload(), p) {
		return Claim{}, fmt.Errorf("%w: non-canonical payload encoding", ErrMalformed)
	}
	return c, nil
}

func appendVarBytes[V string | []byte](b []byte, x V) []byte {
	b = binary.AppendUvarint(b, uint64(len(x)))
	return append(b, x...)
}

func uvarintLen(x uint64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutUvarint(buf[:], x)
}

// reader decodes payload fields, remembering the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) varBytes(max int) []byte {
	if r.err != nil {
		return nil
	}
	n, k := binary.Uvarint(r.b)
	switch {
	case k <= 0:
		r.err = fmt.Errorf("bad length")
		return nil
	case n > uint64(max):
		r.err = fmt.Errorf("field of %d bytes exceeds %d", n, max)
		return nil
	case uint64(len(r.b)-k) < n:
		r.err = fmt.Errorf("truncated field")
		return nil
	}
	v := r.b[k : k+int(n)]
	r.b = r.b[k+int(n):]
	return v
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 1 {
		r.err = fmt.Errorf("truncated kind")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) uint64() uint64 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 8 {
		r.err = fmt.Errorf("truncated timestamp")
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}
