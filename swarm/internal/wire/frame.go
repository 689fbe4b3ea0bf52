package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Frame types of all three stream protocols (one registry, so no two
// protocols give a byte two meanings).
const (
	Hello  byte = 0x01
	Claims byte = 0x02
	Want   byte = 0x03
	Ranges byte = 0x04
	End    byte = 0x05
	Error  byte = 0x06
	Fetch  byte = 0x10
	Pair   byte = 0x20
	Paired byte = 0x21
)

// MaxFrame is the most bytes one frame may hold, its length prefix
// excluded.
const MaxFrame = 1 << 20

// ErrProtocol marks a frame that breaks the protocol (bad type, bad
// encoding, out-of-order bounds). Sessions that meet one are dropped.
var ErrProtocol = errors.New("protocol violation")

// ErrFrameTooLarge is a length prefix above MaxFrame.
var ErrFrameTooLarge = fmt.Errorf("%w: frame exceeds %d bytes", ErrProtocol, MaxFrame)

// Reader reads length-prefixed frames with a size cap. The slice Next
// returns is valid until the next call.
type Reader struct {
	r   *bufio.Reader
	max uint64 // the largest frame this stream may carry
	buf []byte
	n   int64 // bytes read, prefixes included
}

// NewReader reads a session's frames, each up to MaxFrame.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), max: MaxFrame}
}

// NewRequestReader reads the one request frame of a fetch or pair stream,
// at most max bytes. Such a stream is read before any slot of the node is
// taken, so a peer may hold a thousand of them open at once (libp2p's
// stream limits): each must cost a small buffer, not a frame's megabyte.
func NewRequestReader(r io.Reader, max uint64) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 512), max: max}
}

// N is how many bytes were read, length prefixes included.
func (fr *Reader) N() int64 { return fr.n }

// length reads a canonical uvarint length prefix. Read errors pass
// through; a malformed prefix is a protocol violation.
func (fr *Reader) length() (uint64, error) {
	var x uint64
	for i := 0; ; i++ {
		b, err := fr.r.ReadByte()
		if err != nil {
			if i > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		if b < 0x80 {
			if b == 0 && i > 0 {
				return 0, fmt.Errorf("%w: non-canonical frame length", ErrProtocol)
			}
			return x | uint64(b)<<(7*i), nil
		}
		x |= uint64(b&0x7f) << (7 * i)
		if i >= 3 { // four bytes cover MaxFrame: stop reading early
			return 0, ErrFrameTooLarge
		}
	}
}

// Next reads the next frame.
func (fr *Reader) Next() ([]byte, error) {
	size, err := fr.length()
	if err != nil {
		return nil, err
	}
	if size == 0 {
		return nil, fmt.Errorf("%w: empty frame", ErrProtocol)
	}
	if size > fr.max {
		if fr.max == MaxFrame {
			return nil, ErrFrameTooLarge
		}
		return nil, fmt.Errorf("%w: frame of %d bytes exceeds this request's %d", ErrProtocol, size, fr.max)
	}
	// The buffer grows as the bytes arrive, doubling from 4 KiB: a length
	// prefix alone must not make the node allocate the frame it announces.
	b := fr.buf[:0]
	for uint64(len(b)) < size {
		chunk := min(int(size)-len(b), max(4<<10, len(b)))
		b = slices.Grow(b, chunk)
		if _, err := io.ReadFull(fr.r, b[len(b):len(b)+chunk]); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		b = b[:len(b)+chunk]
	}
	fr.buf = b
	fr.n += int64(UvarintLen(size)) + int64(size)
	return b, nil
}

// Writer writes length-prefixed frames through a buffer; Flush sends.
type Writer struct {
	w *bufio.Writer
	n int64 // bytes written, prefixes included
}

// NewWriter returns a frame writer on w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriterSize(w, 64<<10)}
}

// N is how many bytes were written, length prefixes included.
func (fw *Writer) N() int64 { return fw.n }

// Write buffers one frame.
func (fw *Writer) Write(frame []byte) error {
	if len(frame) == 0 || len(frame) > MaxFrame {
		return fmt.Errorf("frame of %d bytes out of bounds", len(frame))
	}
	var p [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(p[:], uint64(len(frame)))
	if _, err := fw.w.Write(p[:k]); err != nil {
		return err
	}
	if _, err := fw.w.Write(frame); err != nil {
		return err
	}
	fw.n += int64(k + len(frame))
	return nil
}

// Flush sends what is buffered.
func (fw *Writer) Flush() error { return fw.w.Flush() }

// UvarintLen is the encoded size of x.
func UvarintLen(x uint64) int {
	var p [binary.MaxVarintLen64]byte
	return binary.PutUvarint(p[:], x)
}
