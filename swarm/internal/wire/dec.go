package wire

import (
	"encoding/binary"
	"fmt"
)

// Dec reads the fields of one frame, remembering the first error: a
// decoder checks Err (or Done) once, after its last field.
type Dec struct {
	b   []byte
	err error
}

// NewDec decodes b (a frame's body).
func NewDec(b []byte) *Dec { return &Dec{b: b} }

// Err is the first error met, nil if none.
func (d *Dec) Err() error { return d.err }

// Rest is what is left to read.
func (d *Dec) Rest() []byte { return d.b }

// Fail records a protocol violation (only the first one counts).
func (d *Dec) Fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)
	}
}

// Uvarint reads a canonical unsigned varint.
func (d *Dec) Uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.Fail("bad varint")
		return 0
	}
	if n != UvarintLen(v) {
		d.Fail("non-canonical varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Bytes reads n bytes (a view into the frame).
func (d *Dec) Bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b) < n {
		d.Fail("truncated frame")
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

// Byte reads one byte.
func (d *Dec) Byte() byte {
	v := d.Bytes(1)
	if v == nil {
		return 0
	}
	return v[0]
}

// Varint reads a zigzag-encoded signed varint.
func (d *Dec) Varint() int64 {
	u := d.Uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

// Uint64 reads 8 little-endian bytes.
func (d *Dec) Uint64() uint64 {
	v := d.Bytes(8)
	if v == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(v)
}

// Count reads a list length and checks it against the bytes left, given
// the least size of one element, so a forged count cannot force a big
// allocation.
func (d *Dec) Count(minElem int) int {
	n := d.Uvarint()
	if d.err == nil && n > uint64(len(d.b)/minElem) {
		d.Fail("list of %d elements does not fit in %d bytes", n, len(d.b))
		return 0
	}
	return int(n)
}

// Done reports the first error, or trailing bytes as one.
func (d *Dec) Done() error {
	if d.err == nil && len(d.b) != 0 {
		d.Fail("%d trailing bytes", len(d.b))
	}
	return d.err
}
