package swarm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/metanode/metanode/store"
)

// Stream framing shared by the sync and fetch protocols: every frame is an
// unsigned varint length followed by that many bytes; the first byte of a
// frame is its type. docs/protocols.md describes each frame.

// Frame types.
const (
	frameHello  byte = 0x01
	frameClaims byte = 0x02
	frameWant   byte = 0x03
	frameRanges byte = 0x04
	frameEnd    byte = 0x05
	frameError  byte = 0x06
	frameFetch  byte = 0x10
)

// Limits of the stream protocols.
const (
	maxFrame        = 1 << 20   // bytes in one frame, length prefix excluded
	claimsFrameFill = 256 << 10 // a CLAIMS frame is flushed once it holds this much
	maxFetchCIDs    = 256       // cids in one FETCH request
	// maxFetchFrame is the largest valid FETCH frame: type, count, and
	// each cid with its length.
	maxFetchFrame = 1 + 2 + maxFetchCIDs*(2+store.MaxCIDBytes)
	protoVersion  = 1
)

// errProtocol marks a frame that breaks the protocol (bad type, bad
// encoding, out-of-order bounds). The session is dropped and counted
// against the peer.
var errProtocol = errors.New("protocol violation")

// errFrameTooLarge is a length prefix above maxFrame.
var errFrameTooLarge = fmt.Errorf("%w: frame exceeds %d bytes", errProtocol, maxFrame)

// frameReader reads length-prefixed frames with a size cap. The returned
// slice is valid until the next call.
type frameReader struct {
	r   *bufio.Reader
	max uint64 // the largest frame this stream may carry
	buf []byte
	n   int64 // bytes read, prefixes included
}

// newFrameReader reads a session's frames (sync: read only once the
// session holds a slot).
func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10), max: maxFrame}
}

// newRequestReader reads the one request frame of a fetch or pair stream,
// at most max bytes. Such a stream is read before any slot of ours is
// taken, so a peer may hold a thousand of them open at once (libp2p's
// stream limits): each must cost a small buffer, not a frame's megabyte
// (review s12 A1: 2,530 streams announcing 1 MiB each held 3.6 GB).
func newRequestReader(r io.Reader, max uint64) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 512), max: max}
}

// length reads a canonical uvarint length prefix. Read errors pass
// through; a malformed prefix is a protocol violation.
func (fr *frameReader) length() (uint64, error) {
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
				return 0, fmt.Errorf("%w: non-canonical frame length", errProtocol)
			}
			return x | uint64(b)<<(7*i), nil
		}
		x |= uint64(b&0x7f) << (7 * i)
		if i >= 3 { // four bytes cover maxFrame: stop reading early
			return 0, errFrameTooLarge
		}
	}
}

func (fr *frameReader) next() ([]byte, error) {
	size, err := fr.length()
	if err != nil {
		return nil, err
	}
	if size == 0 {
		return nil, fmt.Errorf("%w: empty frame", errProtocol)
	}
	if size > fr.max {
		if fr.max == maxFrame {
			return nil, errFrameTooLarge
		}
		return nil, fmt.Errorf("%w: frame of %d bytes exceeds this request's %d", errProtocol, size, fr.max)
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
	fr.n += int64(uvarintLen(size)) + int64(size)
	return b, nil
}

// frameWriter writes length-prefixed frames through a buffer; flush sends.
type frameWriter struct {
	w *bufio.Writer
	n int64 // bytes written, prefixes included
}

func newFrameWriter(w io.Writer) *frameWriter {
	return &frameWriter{w: bufio.NewWriterSize(w, 64<<10)}
}

func (fw *frameWriter) write(frame []byte) error {
	if len(frame) == 0 || len(frame) > maxFrame {
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

func (fw *frameWriter) flush() error { return fw.w.Flush() }

func uvarintLen(x uint64) int {
	var p [binary.MaxVarintLen64]byte
	return binary.PutUvarint(p[:], x)
}

// dec reads the fields of one frame, remembering the first error.
type dec struct {
	b   []byte
	err error
}

func (d *dec) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{errProtocol}, args...)...)
	}
}

func (d *dec) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	if n != uvarintLen(v) {
		d.fail("non-canonical varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b) < n {
		d.fail("truncated frame")
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) byte() byte {
	v := d.bytes(1)
	if v == nil {
		return 0
	}
	return v[0]
}

// varint reads a zigzag-encoded signed varint.
func (d *dec) varint() int64 {
	u := d.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

// uint64 reads 8 little-endian bytes.
func (d *dec) uint64() uint64 {
	v := d.bytes(8)
	if v == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(v)
}

// count reads a list length and checks it against the bytes left, given the
// least size of one element, so a forged count cannot force a big allocation.
func (d *dec) count(minElem int) int {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)/minElem) {
		d.fail("list of %d elements does not fit in %d bytes", n, len(d.b))
		return 0
	}
	return int(n)
}

func (d *dec) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}

// ---- HELLO ----

// Session flags carried by HELLO.
const (
	// flagNoPush: do not send me claims (an interest-mode node keeps only
	// claims about its own cids and fetches those itself).
	flagNoPush uint64 = 1 << 0
	// flagSketch: I read sketch ranges (modeSketch); without it a peer gets
	// fingerprints and id lists only.
	flagSketch uint64 = 1 << 1
)

type hello struct {
	version uint64
	flags   uint64
	setLen  uint64 // items in the sender's set: a hint for logs and streaming
}

func appendHello(b []byte, h hello) []byte {
	b = append(b, frameHello)
	b = binary.AppendUvarint(b, h.version)
	b = binary.AppendUvarint(b, h.flags)
	return binary.AppendUvarint(b, h.setLen)
}

func decodeHello(frame []byte) (hello, error) {
	d := dec{b: frame[1:]}
	h := hello{version: d.uvarint(), flags: d.uvarint(), setLen: d.uvarint()}
	if err := d.done(); err != nil {
		return hello{}, err
	}
	if h.version != protoVersion {
		return hello{}, fmt.Errorf("%w: version %d, want %d", errProtocol, h.version, protoVersion)
	}
	return h, nil
}

// ---- CLAIMS ----

// claimsFrame accumulates claims in wire form into one CLAIMS frame.
type claimsFrame struct {
	b []byte
	n int
}

func (cf *claimsFrame) add(c *store.Claim) { cf.b = c.AppendWire(cf.b); cf.n++ }

func (cf *claimsFrame) size() int { return len(cf.b) }

// bytes returns the frame: type, count, claims.
func (cf *claimsFrame) bytes() []byte {
	out := make([]byte, 0, 1+binary.MaxVarintLen64+len(cf.b))
	out = append(out, frameClaims)
	out = binary.AppendUvarint(out, uint64(cf.n))
	return append(out, cf.b...)
}

func (cf *claimsFrame) reset() { cf.b, cf.n = cf.b[:0], 0 }

// minWireClaim is a lower bound on one claim's wire size: a length byte, the
// magic, three one-byte lengths, kind, ts and signature.
const minWireClaim = 1 + 6 + 3 + 1 + 8 + store.SigBytes

// decodeClaims decodes a CLAIMS frame body (after the type byte) or a gossip
// batch body. Each claim must be canonical; nothing else is checked here.
func decodeClaims(body []byte, max int) ([]store.Claim, error) {
	d := dec{b: body}
	n := d.count(minWireClaim)
	if d.err != nil {
		return nil, d.err
	}
	if n == 0 || n > max {
		return nil, fmt.Errorf("%w: %d claims in one frame (1..%d)", errProtocol, n, max)
	}
	claims := make([]store.Claim, 0, n)
	b := d.b
	for range n {
		c, used, err := store.DecodeWire(b)
		if err != nil {
			return nil, fmt.Errorf("%w: claim %d: %w", errProtocol, len(claims), err)
		}
		claims = append(claims, c)
		b = b[used:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes after claims", errProtocol, len(b))
	}
	return claims, nil
}

// ---- ERROR ----

// Error codes of an ERROR frame.
const (
	errCodeBusy     = 1 // too many sessions; try later
	errCodeNotReady = 2 // the sync set is still loading
	errCodeInternal = 3
	errCodeProtocol = 4
)

// remoteError is an ERROR frame received from the peer.
type remoteError struct {
	code uint64
	msg  string
}

func (e *remoteError) Error() string { return fmt.Sprintf("peer error %d: %s", e.code, e.msg) }

func appendError(b []byte, code uint64, msg string) []byte {
	if len(msg) > 256 {
		msg = msg[:256]
	}
	b = append(b, frameError)
	b = binary.AppendUvarint(b, code)
	b = binary.AppendUvarint(b, uint64(len(msg)))
	return append(b, msg...)
}

func decodeError(frame []byte) error {
	d := dec{b: frame[1:]}
	code := d.uvarint()
	msg := d.bytes(int(min(d.uvarint(), 1024)))
	if err := d.done(); err != nil {
		return err
	}
	return &remoteError{code: code, msg: string(msg)}
}

// ---- FETCH ----

func appendFetch(b []byte, cids []string) []byte {
	b = append(b, frameFetch)
	b = binary.AppendUvarint(b, uint64(len(cids)))
	for _, c := range cids {
		b = binary.AppendUvarint(b, uint64(len(c)))
		b = append(b, c...)
	}
	return b
}

func decodeFetch(frame []byte) ([]string, error) {
	d := dec{b: frame[1:]}
	n := d.count(2)
	if d.err == nil && (n == 0 || n > maxFetchCIDs) {
		d.fail("fetch of %d cids (1..%d)", n, maxFetchCIDs)
	}
	cids := make([]string, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		l := d.uvarint()
		if l == 0 || l > store.MaxCIDBytes {
			d.fail("cid of %d bytes", l)
			break
		}
		c := string(d.bytes(int(l)))
		if d.err == nil {
			// The canonical text form: anything else would match nothing,
			// and an empty answer would read as "no one holds it".
			if err := store.CheckCID(c); err != nil {
				d.fail("cid %d: %v", i+1, err)
				break
			}
		}
		cids = append(cids, c)
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	return cids, nil
}
