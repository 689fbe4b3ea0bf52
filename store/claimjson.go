package store

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ClaimJSON is the JSON form of a claim (claims.md §3). Value is a JSON string
// (text), null (retraction) or {"cipher":"<base64>"}. ID is set in responses
// that list claims and ignored on input.
type ClaimJSON struct {
	UID   string          `json:"uid"`
	CID   string          `json:"cid"`
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
	TS    json.RawMessage `json:"ts"`
	Sig   string          `json:"sig"`
	ID    string          `json:"id,omitempty"`
}

type cipherJSON struct {
	Cipher string `json:"cipher"`
}

// ToJSON returns the JSON form of c; withID adds the claim id.
func (c *Claim) ToJSON(withID bool) ClaimJSON {
	j := ClaimJSON{
		UID: c.UID, CID: c.CID, Key: c.Key,
		TS:  json.RawMessage(strconv.FormatUint(c.TS, 10)),
		Sig: base64.StdEncoding.EncodeToString(c.Sig[:]),
	}
	switch c.Kind {
	case KindText:
		j.Value, _ = json.Marshal(string(c.Value))
	case KindCipher:
		j.Value, _ = json.Marshal(cipherJSON{Cipher: base64.StdEncoding.EncodeToString(c.Value)})
	default:
		j.Value = json.RawMessage("null")
	}
	if withID {
		j.ID = c.ID().String()
	}
	return j
}

// MarshalJSON writes the JSON form without the id.
func (c Claim) MarshalJSON() ([]byte, error) { return json.Marshal(c.ToJSON(false)) }

// UnmarshalJSON reads the JSON form (see Claim.FromJSON).
func (c *Claim) UnmarshalJSON(b []byte) error {
	if err := CheckJSONText(b); err != nil {
		return err
	}
	var j ClaimJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	out, err := j.Claim()
	if err != nil {
		return err
	}
	*c = out
	return nil
}

// Claim converts the JSON form to a claim. A DER signature is accepted and
// stored as compact. It checks the shape only (see Claim.Check, Claim.Verify).
func (j *ClaimJSON) Claim() (Claim, error) {
	c := Claim{UID: j.UID, CID: j.CID, Key: j.Key}
	ts, err := strconv.ParseUint(string(bytes.TrimSpace(j.TS)), 10, 64)
	if err != nil { // a JSON string, float or negative number fails here
		if errors.Is(err, strconv.ErrRange) {
			return c, fmt.Errorf("%w: ts %s is out of range (at most %d)", ErrMalformed, bytes.TrimSpace(j.TS), uint64(math.MaxUint64))
		}
		return c, fmt.Errorf("%w: ts must be a non-negative integer of milliseconds", ErrMalformed)
	}
	c.TS = ts
	v := bytes.TrimSpace(j.Value)
	switch {
	case len(v) == 0:
		return c, fmt.Errorf("%w: value is required (null for a retraction)", ErrMalformed)
	case bytes.Equal(v, []byte("null")):
		c.Kind = KindRetraction
	case v[0] == '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return c, fmt.Errorf("%w: value: %v", ErrMalformed, err)
		}
		c.Kind, c.Value = KindText, []byte(s)
	case v[0] == '{':
		var cj cipherJSON
		d := json.NewDecoder(bytes.NewReader(v))
		d.DisallowUnknownFields()
		if err := d.Decode(&cj); err != nil {
			return c, fmt.Errorf("%w: value object must be {\"cipher\":\"<base64>\"}", ErrMalformed)
		}
		raw, err := strictBase64(cj.Cipher)
		if err != nil {
			return c, fmt.Errorf("%w: cipher is not standard base64: %v", ErrMalformed, err)
		}
		c.Kind, c.Value = KindCipher, raw
	default:
		return c, fmt.Errorf("%w: value must be a string, null or {\"cipher\":…}", ErrMalformed)
	}
	raw, err := strictBase64(j.Sig)
	if err != nil {
		return c, fmt.Errorf("%w: sig is not standard base64: %v", ErrBadSignature, err)
	}
	if c.Sig, err = ParseSig(raw); err != nil {
		return c, err
	}
	return c, nil
}

// strictBase64 decodes standard base64 with padding (claims.md §3) and
// nothing else: Go's decoder skips line breaks, and without Strict it
// takes stray bits in the last symbol, so one signature had many forms.
func strictBase64(s string) ([]byte, error) {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return nil, fmt.Errorf("a line break at byte %d", i)
	}
	return base64.StdEncoding.Strict().DecodeString(s)
}

// textFields are the string fields of a claim's JSON form whose text is
// signed, with the error of each.
var textFields = []struct {
	name string
	err  error
}{{"uid", ErrBadUID}, {"cid", ErrBadCID}, {"key", ErrBadKey}, {"value", ErrBadValue}}

// CheckJSONText refuses a claim's JSON form whose signed text is not valid
// UTF-8 (claims.md §1): raw bytes that are not, or an escaped surrogate
// (\ud800) that is not half of a pair. A JSON decoder puts U+FFFD in
// their place, so the claim would fail its signature check, answered
// bad_signature for a cause the writer cannot see; this names the field
// instead (bad_uid, bad_cid, bad_key; schema_violation for the value).
// Anything else is left to the decoder.
func CheckJSONText(raw []byte) error {
	if utf8.Valid(raw) && !bytes.Contains(raw, []byte(`\u`)) {
		return nil // the usual claim: nothing to look at
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return nil
	}
	for _, f := range textFields {
		for name, v := range fields { // names match as encoding/json matches them
			if strings.EqualFold(name, f.name) && len(v) > 0 && v[0] == '"' {
				if at, ok := validJSONText(v); !ok {
					return fmt.Errorf("%w: %s is not valid UTF-8 (byte %d of its JSON string)", f.err, f.name, at)
				}
			}
		}
	}
	return nil
}

// validJSONText reports whether a JSON string literal (quotes included)
// decodes to valid UTF-8 as written: its bytes are UTF-8, and each
// escaped surrogate is half of a pair. It returns where it is not.
func validJSONText(lit []byte) (int, bool) {
	if !utf8.Valid(lit) {
		for i := 0; i < len(lit); {
			r, n := utf8.DecodeRune(lit[i:])
			if r == utf8.RuneError && n == 1 {
				return i, false
			}
			i += n
		}
	}
	for i := 0; i < len(lit); i++ {
		if lit[i] != '\\' || i+1 >= len(lit) {
			continue
		}
		if lit[i+1] != 'u' {
			i++ // \", \\, \n…: two bytes
			continue
		}
		r := hex4(lit[i+2:])
		switch {
		case r >= 0xD800 && r <= 0xDBFF:
			if i+12 <= len(lit) && lit[i+6] == '\\' && lit[i+7] == 'u' {
				if lo := hex4(lit[i+8:]); lo >= 0xDC00 && lo <= 0xDFFF {
					i += 11
					continue
				}
			}
			return i, false
		case r >= 0xDC00 && r <= 0xDFFF:
			return i, false
		}
		i += 5
	}
	return 0, true
}

// hex4 reads four hex digits (-1 when they are not).
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(d)
	}
	return r
}
