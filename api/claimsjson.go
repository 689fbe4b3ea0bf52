package api

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/metanode/metanode/store"
)

// A claims batch is decoded in one pass when it has the common shape, and
// through encoding/json otherwise. encoding/json reads each claim four
// times (validate the body, skip it into a RawMessage, validate it, decode
// it); for a batch that is a few percent of the verification it precedes.
// The fast path validates the body once (json.Valid, so a malformed body is
// a 400 exactly as before), then extracts each claim's fields into a
// store.ClaimJSON by hand and converts it with the same ClaimJSON.Claim.
// Anything it does not handle (escapes in a field, a cipher value, key
// spellings encoding/json would fold, duplicates) goes to encoding/json for
// that claim, or for the whole body, so the answer is always the one
// encoding/json gives (FuzzClaimsFastPath compares them).

// errSlowPath makes the caller decode with encoding/json.
var errSlowPath = errors.New("not the common shape")

// parseClaimsBody decodes a claims body. It returns the decoded slots, or
// the same *Error readClaims gives for a body that is not {"claims":[…]}.
func parseClaimsBody(body []byte) ([]decodedClaim, error) {
	raws, fast, err := splitClaimsBody(body)
	if errors.Is(err, errSlowPath) {
		raws, err := claimsFromBody(body)
		if err != nil {
			return nil, err
		}
		return decodeClaims(raws), nil
	}
	if err != nil {
		return nil, err
	}
	return convertClaims(raws, fast), nil
}

// claimsFromBody is the encoding/json reading of a claims body.
func claimsFromBody(body []byte) ([]json.RawMessage, error) {
	var b claimsBody
	if err := decodeJSON(body, &b); err != nil {
		return nil, err
	}
	if b.Claims == nil {
		return nil, badRequest(`body must be {"claims":[…]}`)
	}
	if n := len(*b.Claims); n > MaxClaims {
		return nil, tooManyClaims(n)
	}
	return *b.Claims, nil
}

// splitClaimsBody finds the claims of a valid body. For each claim it
// gives either its fields (fast[i], raws[i] nil) or its raw bytes for
// encoding/json. errSlowPath: decode the whole body with encoding/json.
func splitClaimsBody(body []byte) ([]json.RawMessage, []store.ClaimJSON, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil, nil, badRequest("body must be a JSON object")
	}
	if !json.Valid(body) {
		return nil, nil, errSlowPath // let encoding/json word the 400
	}
	p := parser{b: body, i: 1}
	var (
		raws  []json.RawMessage
		fast  []store.ClaimJSON
		found bool
	)
	for first := true; ; first = false {
		p.ws()
		if p.peek() == '}' {
			break
		}
		if !first {
			p.i++ // ','
			p.ws()
		}
		key, ok := p.plainString()
		if !ok {
			return nil, nil, errSlowPath
		}
		p.ws()
		p.i++ // ':'
		p.ws()
		if key != "claims" {
			if bytes.EqualFold([]byte(key), []byte("claims")) {
				return nil, nil, errSlowPath // encoding/json would take it
			}
			p.skipValue()
			continue
		}
		if p.peek() != '[' {
			return nil, nil, errSlowPath // null, or not an array: encoding/json says what
		}
		found, raws, fast = true, raws[:0], fast[:0] // a repeated key: the last wins
		p.i++
		for firstEl := true; ; firstEl = false {
			p.ws()
			if p.peek() == ']' {
				p.i++
				break
			}
			if !firstEl {
				p.i++ // ','
				p.ws()
			}
			start := p.i
			if j, ok := p.claim(); ok {
				fast = append(fast, j)
				raws = append(raws, nil)
				continue
			}
			p.i = start
			p.skipValue()
			fast = append(fast, store.ClaimJSON{})
			raws = append(raws, json.RawMessage(body[start:p.i]))
		}
	}
	if !found {
		return nil, nil, errSlowPath
	}
	if len(raws) > MaxClaims {
		return nil, nil, tooManyClaims(len(raws))
	}
	return raws, fast, nil
}

// convertClaims turns each slot into a claim, on all cores for a big batch.
func convertClaims(raws []json.RawMessage, fast []store.ClaimJSON) []decodedClaim {
	out := make([]decodedClaim, len(raws))
	parallel(len(raws), func(i int) {
		if raws[i] != nil {
			out[i] = decodeClaim(raws[i])
		} else {
			out[i] = claimFromJSON(&fast[i])
		}
	})
	return out
}

// parser walks a body that json.Valid accepted: it never needs to report
// a syntax error, only to give up on what it does not handle.
type parser struct {
	b []byte
	i int
}

func (p *parser) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *parser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// plainString reads a string with no escape, no control character and
// only ASCII (so encoding/json would give exactly these bytes).
func (p *parser) plainString() (string, bool) {
	s, ok := p.plainBytes(false)
	return string(s), ok
}

// plainBytes reads a string as plainString does. raw instead returns the
// string with its quotes and escapes as they are (a RawMessage, decoded
// later by encoding/json): any string of a valid body.
func (p *parser) plainBytes(raw bool) ([]byte, bool) {
	if p.peek() != '"' {
		return nil, false
	}
	start := p.i
	for j := p.i + 1; j < len(p.b); j++ {
		c := p.b[j]
		switch {
		case c == '"':
			p.i = j + 1
			if raw {
				return p.b[start:p.i], true
			}
			return p.b[start+1 : j], true
		case raw && c == '\\':
			j++ // the escaped byte cannot end the string
		case !raw && (c == '\\' || c < 0x20 || c >= 0x80):
			return nil, false
		}
	}
	return nil, false
}

// skipValue moves past one value of a valid document.
func (p *parser) skipValue() {
	switch p.peek() {
	case '"':
		p.i++
		for p.i < len(p.b) {
			c := p.b[p.i]
			p.i++
			if c == '\\' {
				p.i++
			} else if c == '"' {
				return
			}
		}
	case '{', '[':
		depth := 0
		for p.i < len(p.b) {
			switch p.b[p.i] {
			case '"':
				p.skipValue()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					p.i++
					return
				}
			}
			p.i++
		}
	default: // a number or a literal
		for p.i < len(p.b) {
			switch p.b[p.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			p.i++
		}
	}
}

// claim reads one claim object of the common shape.
func (p *parser) claim() (store.ClaimJSON, bool) {
	var j store.ClaimJSON
	if p.peek() != '{' {
		return j, false
	}
	p.i++
	var seen uint8
	for first := true; ; first = false {
		p.ws()
		if p.peek() == '}' {
			p.i++
			return j, true
		}
		if !first {
			p.i++ // ','
			p.ws()
		}
		key, ok := p.plainBytes(false)
		if !ok {
			return j, false
		}
		p.ws()
		p.i++ // ':'
		p.ws()
		var bit uint8
		var field *string
		switch string(key) {
		case "uid":
			bit, field = 1, &j.UID
		case "cid":
			bit, field = 2, &j.CID
		case "key":
			bit, field = 4, &j.Key
		case "sig":
			bit, field = 8, &j.Sig
		case "id":
			bit, field = 16, &j.ID
		case "value":
			bit = 32
		case "ts":
			bit = 64
		default:
			return j, false // unknown, or a spelling encoding/json would fold
		}
		if seen&bit != 0 {
			return j, false
		}
		seen |= bit
		switch {
		case field != nil:
			s, ok := p.plainString()
			if !ok {
				return j, false
			}
			*field = s
		case bit == 32: // value: a string or null; a cipher object goes the slow way
			if bytes.HasPrefix(p.b[p.i:], []byte("null")) {
				j.Value = json.RawMessage("null")
				p.i += 4
				break
			}
			v, ok := p.plainBytes(true)
			if !ok {
				return j, false
			}
			j.Value = json.RawMessage(v)
		default: // ts: digits only
			start := p.i
			for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
				p.i++
			}
			if p.i == start {
				return j, false
			}
			switch p.peek() {
			case '.', 'e', 'E':
				return j, false
			}
			j.TS = json.RawMessage(p.b[start:p.i])
		}
	}
}
