package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Request body limits. POST /api/claims and POST /api/merge carry batches;
// every other body is a small object.
const (
	MaxClaimsBody  = 16 << 20 // bytes
	MaxClaims      = 10_000   // claims per request
	maxSmallBody   = 1 << 20
	maxSearchLimit = 10_000
	defaultPage    = 100 // list and search rows when limit is absent or 0
)

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// writeJSON encodes v into a pooled buffer first, so an encoding failure
// still gets a clean 500 and the answer goes out with a Content-Length.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= 1<<20 { // do not keep the odd huge answer alive
			bufPool.Put(buf)
		}
	}()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode answer: %w", err)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err := w.Write(buf.Bytes())
	return errWritten(err)
}

// writtenError marks a failure after the status line went out: the error
// handler must then not write an envelope.
type writtenError struct{ err error }

func (e writtenError) Error() string { return "write answer: " + e.err.Error() }
func (e writtenError) Unwrap() error { return e.err }

func errWritten(err error) error {
	if err == nil {
		return nil
	}
	return writtenError{err}
}

// readBody reads the whole body, at most limit bytes (413 beyond).
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, &Error{Status: http.StatusRequestEntityTooLarge, Slug: SlugTooLarge,
			Message: fmt.Sprintf("request body of %d bytes exceeds %d", r.ContentLength, limit)}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, err // errorFor makes it a 413
		}
		return nil, badRequest("read body: %v", err)
	}
	return body, nil
}

// decodeBody reads a JSON object body of at most limit bytes into v. A
// malformed body is a 400 schema_violation, an oversized one a 413.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	body, err := readBody(w, r, limit)
	if err != nil {
		return err
	}
	return decodeJSON(body, v)
}

func decodeJSON(body []byte, v any) error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return badRequest("body must be a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return badRequest("%s", describeJSON(err, "body"))
	}
	return nil
}
