package store

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
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
		raw, err := base64.StdEncoding.DecodeString(cj.Cipher)
		if err != nil {
			return c, fmt.Errorf("%w: cipher is not standard base64", ErrMalformed)
		}
		c.Kind, c.Value = KindCipher, raw
	default:
		return c, fmt.Errorf("%w: value must be a string, null or {\"cipher\":…}", ErrMalformed)
	}
	raw, err := base64.StdEncoding.DecodeString(j.Sig)
	if err != nil {
		return c, fmt.Errorf("%w: sig is not standard base64", ErrBadSignature)
	}
	if c.Sig, err = ParseSig(raw); err != nil {
		return c, err
	}
	return c, nil
}
