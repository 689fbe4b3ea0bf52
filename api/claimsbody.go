package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
)

// readClaimsBody reads the body of POST /api/claims and POST /api/merge,
// {"claims":[…], other keys…}, at most MaxClaimsBody bytes. The claims
// array is streamed one element at a time, so a body of millions of tiny
// elements is refused with 413 at element MaxClaims+1 instead of after
// decoding them all (review s9 ops #5: 16.5 MB of [] cost 500 MB and ~20 s
// of CPU only to answer 413). The other top-level keys are decoded into
// rest (nil: ignored) as json.Unmarshal would: case-insensitive, the last
// of a repeated key wins, unknown keys ignored. A missing or null claims
// is a 400 naming the shape.
func readClaimsBody(w http.ResponseWriter, r *http.Request, rest any) ([]json.RawMessage, error) {
	if r.ContentLength > MaxClaimsBody {
		return nil, &Error{Status: http.StatusRequestEntityTooLarge, Slug: SlugTooLarge,
			Message: fmt.Sprintf("request body of %d bytes exceeds %d", r.ContentLength, MaxClaimsBody)}
	}
	br := bufio.NewReader(http.MaxBytesReader(w, r.Body, MaxClaimsBody))
	skipped, ok := startsObject(br)
	if !ok {
		return nil, notAnObject(br)
	}
	cr := claimsReader{dec: json.NewDecoder(br), skipped: skipped}
	claims, err := cr.read(rest)
	if err != nil {
		return nil, err
	}
	if claims == nil {
		return nil, badRequest(`body must be {"claims":[…]}`)
	}
	return claims, nil
}

// startsObject reports whether the first byte after JSON whitespace is
// '{', leaving it unread, and how many whitespace bytes it read.
func startsObject(br *bufio.Reader) (skipped int64, ok bool) {
	for ; ; skipped++ {
		b, err := br.ReadByte()
		if err != nil {
			return skipped, false
		}
		switch b {
		case ' ', '\t', '\n', '\r':
			continue
		}
		_ = br.UnreadByte()
		return skipped, b == '{'
	}
}

// notAnObject answers a body that is not a JSON object as a whole-value
// decode does: a type or syntax error, or the shape for null. An array is
// answered from its first byte: scanning a body of millions of elements
// only to say it is not an object would cost what streaming saves.
func notAnObject(br *bufio.Reader) error {
	if b, err := br.Peek(1); err == nil && b[0] == '[' {
		return badRequest("body must be an object, not an array")
	}
	dec := json.NewDecoder(br)
	var b struct {
		Claims *[]json.RawMessage `json:"claims"`
	}
	if err := dec.Decode(&b); err != nil {
		return bodyError(err)
	}
	if err := atEOF(dec); err != nil {
		return err
	}
	return badRequest(`body must be {"claims":[…]}`) // null
}

// atEOF checks that nothing follows the top-level value.
func atEOF(dec *json.Decoder) error {
	_, err := dec.Token()
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return bodyError(err)
	}
	return dataAfter()
}

func dataAfter() error { return badRequest("malformed JSON body: data after the object") }

// claimsReader walks one body object with a json.Decoder's tokens.
type claimsReader struct {
	dec     *json.Decoder
	skipped int64 // whitespace read before the decoder started
}

// read reads the object whose '{' is next and everything after it. It
// returns the last claims array (nil when absent or null).
func (cr *claimsReader) read(rest any) ([]json.RawMessage, error) {
	if _, err := cr.token(); err != nil { // '{': startsObject saw it
		return nil, err
	}
	var claims []json.RawMessage
	var others bytes.Buffer // the other keys, as an object for rest
	for cr.dec.More() {
		tok, err := cr.token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string) // a key is always a string inside an object
		// encoding/json matches field names with bytes.EqualFold.
		if strings.EqualFold(key, "claims") {
			if claims, err = cr.array(); err != nil {
				return nil, err
			}
			continue
		}
		if rest == nil {
			if err := cr.decode(new(skipValue)); err != nil {
				return nil, err
			}
			continue
		}
		var raw json.RawMessage
		if err := cr.decode(&raw); err != nil {
			return nil, err
		}
		if others.Len() == 0 {
			others.WriteByte('{')
		} else {
			others.WriteByte(',')
		}
		k, _ := json.Marshal(key) // a string always marshals
		others.Write(k)
		others.WriteByte(':')
		others.Write(raw)
	}
	if _, err := cr.token(); err != nil { // '}'
		return nil, err
	}
	if _, err := cr.dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, cr.bodyError(err)
		}
		return nil, dataAfter()
	}
	if rest != nil && others.Len() > 0 {
		others.WriteByte('}')
		if err := json.Unmarshal(others.Bytes(), rest); err != nil {
			return nil, badRequest("%s", describeJSON(err, "body"))
		}
	}
	return claims, nil
}

// array reads the value of a claims key: an array streamed element by
// element (413 at element MaxClaims+1), null (nil), or a 400 naming the
// JSON type found.
func (cr *claimsReader) array() ([]json.RawMessage, error) {
	tok, err := cr.dec.Token()
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te): // a number Token could not hold
		return nil, claimsTypeError("number")
	case err != nil:
		return nil, cr.bodyError(err)
	}
	switch tok := tok.(type) {
	case nil:
		return nil, nil
	case json.Delim:
		if tok != '[' {
			return nil, claimsTypeError("object")
		}
	case string:
		return nil, claimsTypeError("string")
	case bool:
		return nil, claimsTypeError("bool")
	default:
		return nil, claimsTypeError("number")
	}
	claims := []json.RawMessage{}
	for cr.dec.More() {
		if len(claims) == MaxClaims {
			return nil, tooManyClaims()
		}
		var raw json.RawMessage
		if err := cr.decode(&raw); err != nil {
			return nil, err
		}
		claims = append(claims, raw)
	}
	if _, err := cr.token(); err != nil { // ']'
		return nil, err
	}
	return claims, nil
}

// skipValue takes any JSON value without copying it: the decoder has
// checked its syntax.
type skipValue struct{}

func (*skipValue) UnmarshalJSON([]byte) error { return nil }

// claimsTypeError is the message a whole-value decode gives for a claims
// value of another JSON type.
func claimsTypeError(kind string) error {
	te := &json.UnmarshalTypeError{Value: kind, Type: reflect.TypeFor[[]json.RawMessage](), Field: "claims"}
	return badRequest("%s", describeJSON(te, "body"))
}

func (cr *claimsReader) token() (json.Token, error) {
	tok, err := cr.dec.Token()
	if err != nil {
		return nil, cr.bodyError(err)
	}
	return tok, nil
}

func (cr *claimsReader) decode(v any) error {
	if err := cr.dec.Decode(v); err != nil {
		return cr.bodyError(err)
	}
	return nil
}

// bodyError is bodyError with a syntax error's offset made the byte of the
// body where it is, counted from 1 as a whole-value decode counts it (a
// streaming Decoder counts only the bytes of the values it read whole).
func (cr *claimsReader) bodyError(err error) error {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return bodyError(err)
	}
	// The decoder stands at the value that failed, or at the byte that
	// cannot be there, and its buffer holds at least up to the fault: a
	// fresh decoder reading from there finds the fault's place in the
	// value (or, at a byte that starts a valid value, it is that byte).
	pos := cr.skipped + cr.dec.InputOffset()
	at, msg := pos+1, se.Error()
	var again *json.SyntaxError
	if errors.As(json.NewDecoder(cr.dec.Buffered()).Decode(new(json.RawMessage)), &again) {
		at, msg = pos+again.Offset, again.Error()
	}
	return badRequest("body is not valid JSON: %s (at byte %d)", msg, at)
}
