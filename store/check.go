package store

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ipfs/go-cid"
)

// DefaultMaxSkew is how far in the future a claim's ts may be.
const DefaultMaxSkew = 10 * time.Minute

// LinkPrefix starts the key of a link claim: cids/<other cid>.
const LinkPrefix = "cids/"

// VouchPrefix starts the key of a vouch claim: vouch/<uid>.
const VouchPrefix = "vouch/"

// Check validates everything about c except its signature: uid, cid, key
// syntax, reserved and deprecated keys, link values, value size and the
// future-timestamp skew relative to now (skew <= 0 means DefaultMaxSkew).
func (c *Claim) Check(now time.Time, skew time.Duration) error {
	if err := CheckUID(c.UID); err != nil {
		return err
	}
	if err := CheckCID(c.CID); err != nil {
		return err
	}
	if err := CheckKey(c.Key); err != nil {
		return err
	}
	switch c.Kind {
	case KindRetraction:
		if c.Value != nil {
			return fmt.Errorf("%w: a retraction has no value", ErrBadValue)
		}
	case KindText:
		if len(c.Value) > MaxValueBytes {
			return fmt.Errorf("%w: text of %d bytes exceeds %d", ErrTooLarge, len(c.Value), MaxValueBytes)
		}
		if !utf8.Valid(c.Value) {
			return fmt.Errorf("%w: text is not valid UTF-8", ErrBadValue)
		}
	case KindCipher:
		if len(c.Value) > MaxValueBytes {
			return fmt.Errorf("%w: ciphertext of %d bytes exceeds %d", ErrTooLarge, len(c.Value), MaxValueBytes)
		}
	default:
		return fmt.Errorf("%w: unknown kind %d", ErrBadValue, c.Kind)
	}
	if other, ok := strings.CutPrefix(c.Key, LinkPrefix); ok {
		if err := CheckCID(other); err != nil {
			return fmt.Errorf("%w: link target: %v", ErrBadKey, err)
		}
		if other == c.CID {
			return fmt.Errorf("%w: a cid cannot link to itself", ErrBadKey)
		}
		if c.Kind == KindCipher || (c.Kind == KindText && string(c.Value) != "true") {
			return fmt.Errorf("%w: a link's value must be \"true\" or a retraction", ErrBadValue)
		}
	}
	if skew <= 0 {
		skew = DefaultMaxSkew
	}
	if limit := now.Add(skew).UnixMilli(); limit >= 0 && c.TS > uint64(limit) {
		return fmt.Errorf("%w: ts %d is more than %s ahead of this node's clock", ErrFutureTimestamp, c.TS, skew)
	}
	return nil
}

// CheckCID reports whether s parses as a CID written in its canonical form.
func CheckCID(s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty cid", ErrBadCID)
	}
	if len(s) > MaxCIDBytes {
		return fmt.Errorf("%w: cid longer than %d bytes", ErrBadCID, MaxCIDBytes)
	}
	c, err := cid.Decode(s)
	if err != nil {
		return fmt.Errorf("%w: %q: %v", ErrBadCID, s, err)
	}
	if canon := c.String(); canon != s {
		return fmt.Errorf("%w: %q is not canonical; write %q", ErrBadCID, s, canon)
	}
	return nil
}

// CheckKey validates a field path: 1–1024 bytes of UTF-8, no control
// characters, no empty, "." or ".." segment, and not a reserved or
// deprecated key.
func CheckKey(k string) error {
	switch {
	case k == "":
		return fmt.Errorf("%w: empty key", ErrBadKey)
	case len(k) > MaxKeyBytes:
		return fmt.Errorf("%w: key longer than %d bytes", ErrBadKey, MaxKeyBytes)
	case !utf8.ValidString(k):
		return fmt.Errorf("%w: key is not valid UTF-8", ErrBadKey)
	}
	for _, r := range k {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: key contains a control character", ErrBadKey)
		}
	}
	for seg := range strings.SplitSeq(k, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%w: %q has an empty segment (or a leading or trailing /)", ErrBadKey, k)
		case ".", "..":
			return fmt.Errorf("%w: %q has a %q segment", ErrBadKey, k, seg)
		}
	}
	switch {
	case strings.HasPrefix(k, "cid_"), k == "midhash256", k == "canonical_cid":
		return fmt.Errorf("%w: %q was removed; write cids/<cid> = \"true\" instead", ErrDeprecatedField, k)
	case IsLocalKey(k) && k != "sizeByte":
		return fmt.Errorf("%w: %q is a box-local fact from the file watcher and is never signed", ErrReservedKey, k)
	}
	return nil
}

// IsLocalKey reports whether k is one of the box-local fields the file watcher
// provides (filePath, sizeByte, mtimeNano).
func IsLocalKey(k string) bool {
	return k == "filePath" || k == "sizeByte" || k == "mtimeNano"
}

// IsLinkKey reports whether k is a cids/<cid> link key.
func IsLinkKey(k string) bool { return strings.HasPrefix(k, LinkPrefix) }

// LinkTarget returns the cid a link claim joins, and whether c is a live link
// (a text "true" on a cids/<cid> key).
func (c *Claim) LinkTarget() (string, bool) {
	other, ok := strings.CutPrefix(c.Key, LinkPrefix)
	return other, ok && c.Kind == KindText && string(c.Value) == "true"
}

// CheckClaim reports whether Submit would take c on its own merits, trust
// aside: its shape, key, value and clock (Check, with the store's clock
// and allowance) and its signature. The node asks it before it trusts a
// local writer, so only a signer that can have a claim stored is trusted.
func (s *Store) CheckClaim(c *Claim) error {
	if err := c.Check(s.cfg.Now(), s.cfg.MaxSkew); err != nil {
		return err
	}
	return c.Verify()
}
