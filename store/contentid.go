package store

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/google/uuid"
	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
)

// Multicodec and multihash codes that matter for ranking (content-ids.md).
const (
	codeDagPB         = 0x70
	codeSHA2_256      = 0x12
	codeSHA3_256      = 0x16
	codeSHA3_384      = 0x15
	codeMidhash256    = 0x1000
	codeBtihV1File    = 0x1001
	codeBtihV2File    = 0x1002
	codeNzbPosting    = 0x1003
	codeNzbRelease    = 0x1005
	codeURL           = 0x1006
	codeCard          = 0x1007
	codeYTVideo       = 0x1008
	codeExtPlay       = 0x1009
	codeProviderFile  = 0x100A
	codeBtihV2        = 0x10B7
	codeLibp2pKey     = 0x72
	midhashSampleSize = 1 << 20
)

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// CIDRank ranks a cid for canonical_cid: the higher, the better.
func CIDRank(s string) int {
	rest, ok := strings.CutPrefix(s, "b")
	if !ok {
		return 0
	}
	raw, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(strings.ToUpper(rest))
	if err != nil {
		return 0
	}
	version, n := binary.Uvarint(raw)
	if n <= 0 || version != 1 {
		return 0
	}
	raw = raw[n:]
	codec, n := binary.Uvarint(raw)
	if n <= 0 {
		return 0
	}
	hash, n := binary.Uvarint(raw[n:])
	if n <= 0 {
		return 0
	}
	switch {
	case codec == codeDagPB:
		return 40
	case isBittorrent(codec) || isBittorrent(hash):
		return 20
	case codec >= codeNzbRelease && codec <= codeProviderFile:
		return 5
	case codec == codeNzbPosting:
		return 25
	case hash == codeSHA2_256 || hash == codeSHA3_256 || hash == codeSHA3_384:
		return 30
	case hash == codeMidhash256:
		return 10
	}
	return 0
}

func isBittorrent(code uint64) bool {
	return code == codeBtihV1File || code == codeBtihV2File || code == codeBtihV2
}

// BetterCID returns the better of two cids: the higher rank, then the
// lexicographically smaller string.
func BetterCID(a, b string) string {
	ra, rb := CIDRank(a), CIDRank(b)
	switch {
	case ra > rb:
		return a
	case rb > ra:
		return b
	case a <= b:
		return a
	}
	return b
}

// CanonicalCID folds BetterCID over cids ("" for none).
func CanonicalCID(cids []string) string {
	best := ""
	for i, c := range cids {
		if i == 0 {
			best = c
			continue
		}
		best = BetterCID(best, c)
	}
	return best
}

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// EncodeRID writes 16 bytes as 26 upper-case Crockford base32 characters in
// the ULID layout: the 128 bits read as a 130-bit number with two leading
// zero bits, cut into 5-bit groups, most significant first.
func EncodeRID(b [16]byte) string {
	hi, lo := binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	var out [26]byte
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

// NewRID mints a fresh record id: a UUIDv7 in Crockford base32.
func NewRID() string {
	return EncodeRID(uuid.Must(uuid.NewV7()))
}

// IsRID reports whether s has the shape of a rid.
func IsRID(s string) bool {
	if len(s) != 26 || s[0] > '7' {
		return false
	}
	for i := range len(s) {
		if !strings.ContainsRune(crockford, rune(s[i])) {
			return false
		}
	}
	return true
}

// Midhash256 computes the watcher's fast file id from a reader of the file's
// content and its size.
func Midhash256(r io.ReaderAt, size int64) (string, error) {
	h := sha256.New()
	var sz [8]byte
	binary.BigEndian.PutUint64(sz[:], uint64(size))
	h.Write(sz[:])
	off, n := int64(0), size
	if size > midhashSampleSize {
		off, n = (size-midhashSampleSize)/2, midhashSampleSize
	}
	if _, err := io.Copy(h, io.NewSectionReader(r, off, n)); err != nil {
		return "", fmt.Errorf("midhash256: %w", err)
	}
	return MidhashCID(h.Sum(nil)), nil
}

// Midhash256File computes midhash256 of a file, using its current size.
func Midhash256File(path string) (cidStr string, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	c, err := Midhash256(f, st.Size())
	return c, st.Size(), err
}

// MidhashCID encodes a 32-byte midhash256 digest as its cid text.
func MidhashCID(digest []byte) string {
	b := []byte{0x01}
	b = binary.AppendUvarint(b, codeMidhash256)
	b = binary.AppendUvarint(b, codeMidhash256)
	b = append(b, byte(len(digest)))
	b = append(b, digest...)
	return "b" + lowerBase32.EncodeToString(b)
}

// PeerIDCID returns the cid of the libp2p peer id that the same secp256k1
// key as uid yields (codec libp2p-key 0x72, identity multihash of the
// protobuf public key). A node's vouch claims live on this cid.
func PeerIDCID(uid string) (string, error) {
	pk, err := defaultKeys.get(uid)
	if err != nil {
		return "", err
	}
	// protobuf PublicKey{Type: Secp256k1 (2), Data: 33-byte compressed key}
	pb := append([]byte{0x08, 0x02, 0x12, 0x21}, pk.SerializeCompressed()...)
	digest, err := mh.Sum(pb, mh.IDENTITY, -1)
	if err != nil {
		return "", fmt.Errorf("peer id of %s: %w", uid, err)
	}
	return cid.NewCidV1(codeLibp2pKey, digest).String(), nil
}
