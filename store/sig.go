package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
	"github.com/mr-tron/base58"
)

// UIDFromPubKey returns "z" + base58btc of the 33-byte compressed key.
func UIDFromPubKey(pk *secp256k1.PublicKey) string {
	return "z" + base58.Encode(pk.SerializeCompressed())
}

// ParseUID returns the public key a uid names. Only the canonical shape is
// accepted: "z" + base58btc of a 33-byte compressed point on the curve.
func ParseUID(uid string) (*secp256k1.PublicKey, error) {
	if len(uid) < 2 || len(uid) > MaxUIDBytes || uid[0] != 'z' {
		return nil, fmt.Errorf("%w: %q is not \"z\" + base58btc of a compressed secp256k1 key", ErrBadUID, uid)
	}
	raw, err := base58.Decode(uid[1:])
	if err != nil || len(raw) != secp256k1.PubKeyBytesLenCompressed || (raw[0] != 2 && raw[0] != 3) {
		return nil, fmt.Errorf("%w: %q does not decode to a 33-byte compressed key", ErrBadUID, uid)
	}
	pk, err := secp256k1.ParsePubKey(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrBadUID, uid, err)
	}
	if base58.Encode(raw) != uid[1:] {
		return nil, fmt.Errorf("%w: %q is not canonical base58", ErrBadUID, uid)
	}
	return pk, nil
}

// CheckUID reports whether uid is well formed.
func CheckUID(uid string) error {
	_, err := defaultKeys.get(uid)
	return err
}

// Signer signs claims with a secp256k1 private key.
type Signer struct {
	priv *secp256k1.PrivateKey
	uid  string
}

// NewSigner wraps a private key.
func NewSigner(priv *secp256k1.PrivateKey) *Signer {
	return &Signer{priv: priv, uid: UIDFromPubKey(priv.PubKey())}
}

// GenerateSigner makes a signer with a fresh random key.
func GenerateSigner() (*Signer, error) {
	priv, err := secp256k1.GeneratePrivateKeyFromRand(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return NewSigner(priv), nil
}

// SignerFromHex parses a 32-byte private scalar written in hex (an optional
// 0x prefix is allowed).
func SignerFromHex(s string) (*Signer, error) {
	s = strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "0x"), "0X")
	raw, err := hex.DecodeString(s)
	if err != nil || len(raw) != 32 {
		return nil, errors.New("private key must be 64 hex characters")
	}
	var k secp256k1.ModNScalar
	if overflow := k.SetByteSlice(raw); overflow || k.IsZero() {
		return nil, errors.New("private key is not a valid secp256k1 scalar")
	}
	return NewSigner(secp256k1.NewPrivateKey(&k)), nil
}

// LoadSigner reads a key file written by WriteFile. A file that exists but
// holds no key is ErrBadKeyFile, naming the file.
func LoadSigner(path string) (*Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read signer key: %w", err)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil, fmt.Errorf("read signer key: %s is %w: it is empty (%d bytes; a write that was cut short?)", path, ErrBadKeyFile, len(b))
	}
	s, err := SignerFromHex(string(b))
	if err != nil {
		return nil, fmt.Errorf("read signer key: %s is %w: %v", path, ErrBadKeyFile, err)
	}
	return s, nil
}

// WriteFile writes the private key as hex to path with mode 0600, refusing to
// overwrite an existing file (the error then wraps fs.ErrExist). The file
// appears whole or not at all: an error leaves nothing behind.
func (s *Signer) WriteFile(path string) error {
	if err := writeKeyFile(path, []byte(s.PrivateHex()+"\n"), realKeyFileOps); err != nil {
		return fmt.Errorf("write signer key %s: %w", path, err)
	}
	return nil
}

// UID returns the signer's uid.
func (s *Signer) UID() string { return s.uid }

// PrivateKey returns the underlying key (the node uses it as its libp2p identity).
func (s *Signer) PrivateKey() *secp256k1.PrivateKey { return s.priv }

// PrivateHex returns the private scalar in hex.
func (s *Signer) PrivateHex() string {
	b := s.priv.Serialize()
	return hex.EncodeToString(b)
}

// Sign sets c.UID to the signer's uid and c.Sig to an RFC 6979, low-S
// signature over the claim id.
func (s *Signer) Sign(c *Claim) {
	c.UID = s.uid
	id := c.ID()
	sig := ecdsa.Sign(s.priv, id[:])
	r, sc := sig.R(), sig.S()
	r.PutBytesUnchecked(c.Sig[:32])
	sc.PutBytesUnchecked(c.Sig[32:])
}

// Text, Retraction and Cipher build signed claims; ts is in milliseconds.
func (s *Signer) Text(cid, key, value string, ts uint64) Claim {
	c := Claim{CID: cid, Key: key, Kind: KindText, Value: []byte(value), TS: ts}
	s.Sign(&c)
	return c
}

func (s *Signer) Retraction(cid, key string, ts uint64) Claim {
	c := Claim{CID: cid, Key: key, Kind: KindRetraction, TS: ts}
	s.Sign(&c)
	return c
}

func (s *Signer) Cipher(cid, key string, value []byte, ts uint64) Claim {
	c := Claim{CID: cid, Key: key, Kind: KindCipher, Value: value, TS: ts}
	s.Sign(&c)
	return c
}

// ParseSig turns a compact (64-byte r‖s) or strict DER signature into the
// compact form, refusing zero or out-of-range scalars and high S.
func ParseSig(b []byte) ([SigBytes]byte, error) {
	var out [SigBytes]byte
	var r, s secp256k1.ModNScalar
	if len(b) == SigBytes {
		if r.SetByteSlice(b[:32]) || s.SetByteSlice(b[32:]) {
			return out, fmt.Errorf("%w: r or s is not below the curve order", ErrBadSignature)
		}
	} else {
		sig, err := ecdsa.ParseDERSignature(b)
		if err != nil {
			return out, fmt.Errorf("%w: neither 64-byte compact nor strict DER: %v", ErrBadSignature, err)
		}
		r, s = sig.R(), sig.S()
	}
	if r.IsZero() || s.IsZero() {
		return out, fmt.Errorf("%w: r or s is zero", ErrBadSignature)
	}
	if s.IsOverHalfOrder() {
		return out, fmt.Errorf("%w: high-S signature (malleable); use low-S", ErrBadSignature)
	}
	r.PutBytesUnchecked(out[:32])
	s.PutBytesUnchecked(out[32:])
	return out, nil
}

// Verify checks c's signature against its uid. It does not run Check.
func (c *Claim) Verify() error { return defaultKeys.verify(c, c.ID()) }

// VerifyID is Verify for a caller that already computed the claim's id.
func (c *Claim) VerifyID(id ID) error { return defaultKeys.verify(c, id) }

// VerifyAll verifies claims in parallel on all cores and returns one error
// per claim (nil when valid). skip[i], when set, leaves claim i unverified.
func VerifyAll(claims []Claim, ids []ID, skip []bool) []error {
	return defaultKeys.verifyAll(claims, ids, skip, true)
}

// VerifyAllPlain is VerifyAll without per-key tables: decred's
// ecdsa.Verify on parsed keys, the textbook cost of a verification.
// Benchmarks divide by its rate (the machine's verification limit), so that
// their ratios compare across runs, machines and changes of this package.
func VerifyAllPlain(claims []Claim, ids []ID) []error {
	return defaultKeys.verifyAll(claims, ids, nil, false)
}

func (kc *keyCache) verifyAll(claims []Claim, ids []ID, skip []bool, tables bool) []error {
	errs := make([]error, len(claims))
	workers := min(runtime.GOMAXPROCS(0), (len(claims)+15)/16)
	run := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if skip == nil || !skip[i] {
				errs[i] = kc.verifyWith(&claims[i], ids[i], tables)
			}
		}
	}
	if workers <= 1 {
		run(0, len(claims))
		return errs
	}
	var wg sync.WaitGroup
	chunk := (len(claims) + workers - 1) / workers
	for lo := 0; lo < len(claims); lo += chunk {
		wg.Go(func() { run(lo, min(lo+chunk, len(claims))) })
	}
	wg.Wait()
	return errs
}

// keyCache keeps parsed public keys by uid: parsing (a square root on the
// curve) costs about a tenth of a verification and signers repeat a lot.
// A signer verified tableAfter times also gets a keyTable, which makes its
// verifications about three times cheaper; at most keyTablesMax keys have
// one (about 1 MB each).
type keyCache struct {
	mu         sync.RWMutex
	keys       map[string]*keyEntry
	tables     atomic.Int32 // tables built since the last clear
	tableAfter int64        // verifications of a key before its table is built
}

type keyEntry struct {
	pk    *secp256k1.PublicKey
	uses  atomic.Int64
	table atomic.Pointer[keyTable]
}

const (
	keyCacheMax  = 1 << 14
	keyTablesMax = 16
	// A table costs about 15 ms to build and saves about 0.15 ms a
	// verification: it pays for itself after a hundred.
	keyTableAfter = 256
)

func newKeyCache(tableAfter int64) *keyCache {
	return &keyCache{keys: make(map[string]*keyEntry), tableAfter: tableAfter}
}

// defaultKeys is shared by the whole process, not owned by a Store: a
// parsed key is a pure function of its uid (nothing to invalidate, nothing
// store-specific), and Claim.Verify, CheckUID and the swarm's validators
// verify without a Store. It is a bounded memo table behind a lock.
var defaultKeys = newKeyCache(keyTableAfter)

func (kc *keyCache) get(uid string) (*secp256k1.PublicKey, error) {
	e, err := kc.entry(uid)
	if err != nil {
		return nil, err
	}
	return e.pk, nil
}

func (kc *keyCache) entry(uid string) (*keyEntry, error) {
	kc.mu.RLock()
	e := kc.keys[uid]
	kc.mu.RUnlock()
	if e != nil {
		return e, nil
	}
	pk, err := ParseUID(uid)
	if err != nil {
		return nil, err
	}
	e = &keyEntry{pk: pk}
	kc.mu.Lock()
	if len(kc.keys) >= keyCacheMax {
		clear(kc.keys) // crude but bounded; a working set this large is rare
		kc.tables.Store(0)
	}
	kc.keys[uid] = e
	kc.mu.Unlock()
	return e, nil
}

// noteVerified counts a valid signature of e's key and builds its table on
// the count that makes e a frequent signer (one caller builds; the others go
// on without it). Only valid signatures count: forged ones must not earn a
// key one of the few tables.
func (kc *keyCache) noteVerified(e *keyEntry) {
	if e.uses.Add(1) != kc.tableAfter {
		return
	}
	if kc.tables.Add(1) > keyTablesMax {
		kc.tables.Add(-1)
		return
	}
	var q secp256k1.JacobianPoint
	e.pk.AsJacobian(&q)
	e.table.Store(newKeyTable(&q))
}

func (kc *keyCache) verify(c *Claim, id ID) error { return kc.verifyWith(c, id, true) }

func (kc *keyCache) verifyWith(c *Claim, id ID, tables bool) error {
	e, err := kc.entry(c.UID)
	if err != nil {
		return err
	}
	var r, s secp256k1.ModNScalar
	if r.SetByteSlice(c.Sig[:32]) || s.SetByteSlice(c.Sig[32:]) || r.IsZero() || s.IsZero() {
		return fmt.Errorf("%w: r or s out of range", ErrBadSignature)
	}
	if s.IsOverHalfOrder() {
		return fmt.Errorf("%w: high-S signature (malleable)", ErrBadSignature)
	}
	if t := e.table.Load(); tables && t != nil {
		if !verifyTable(t, &r, &s, id[:]) {
			return fmt.Errorf("%w: does not verify against %s", ErrBadSignature, c.UID)
		}
		return nil
	}
	if !ecdsa.NewSignature(&r, &s).Verify(id[:], e.pk) {
		return fmt.Errorf("%w: does not verify against %s", ErrBadSignature, c.UID)
	}
	if tables {
		kc.noteVerified(e)
	}
	return nil
}
