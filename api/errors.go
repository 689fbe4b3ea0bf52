package api

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"

	"github.com/metanode/metanode/store"
)

// Slugs of the error envelope (http-api.md "Errors") that are not store
// sentinels' own.
const (
	SlugSchemaViolation     = "schema_violation"
	SlugUnknownRoot         = "unknown_root"
	SlugUnknownCID          = "unknown_cid"
	SlugAliasCollision      = "alias_collision"
	SlugTooLarge            = "too_large"
	SlugStorageUnavailable  = "storage_unavailable"
	SlugInternal            = "internal"
	SlugGone                = "gone"
	SlugBadUID              = "bad_uid"
	SlugMethodNotAllowed    = "method_not_allowed"
	SlugRangeNotSatisfiable = "range_not_satisfiable" // GET /file/{cid} with a Range past the end
	SlugPreconditionFailed  = "precondition_failed"   // GET /file/{cid} with an If-Match that fails
)

// ErrClosed is returned by a second Server.Close.
var ErrClosed = errors.New("api server closed")

// Error is an error answer of the API: the envelope
// {"error":slug,"message":text,"retryable":bool} and its HTTP status. The
// server builds one from every handler error; the Client returns one for
// every non-2xx answer.
type Error struct {
	Status    int    `json:"-"`
	Slug      string `json:"error"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`

	err error // the cause, on the server side only
}

func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("%d %s", e.Status, e.Slug)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Slug, e.Message)
}

// Unwrap returns the cause on the server side (nil in a client's Error).
func (e *Error) Unwrap() error { return e.err }

// slugSentinels lets a client's Error match the store sentinel its slug
// stands for, so CLI code can write errors.Is(err, store.ErrNotFound).
var slugSentinels = map[string]error{
	"bad_signature":        store.ErrBadSignature,
	"bad_uid":              store.ErrBadUID,
	"bad_cid":              store.ErrBadCID,
	"bad_key":              store.ErrBadKey,
	"deprecated_field":     store.ErrDeprecatedField,
	"reserved_key":         store.ErrReservedKey,
	"future_timestamp":     store.ErrFutureTimestamp,
	"untrusted_signer":     store.ErrUntrusted,
	SlugUnknownCID:         store.ErrNotFound,
	SlugUnknownRoot:        store.ErrNotFound,
	SlugStorageUnavailable: store.ErrUnavailable,
	SlugBusy:               ErrBusy,
}

// Is matches store.ErrNotFound for any 404 and the store sentinel named by
// the slug (bad_uid → store.ErrBadUID, storage_unavailable →
// store.ErrUnavailable, …).
func (e *Error) Is(target error) bool {
	if target == store.ErrNotFound && e.Status == http.StatusNotFound {
		return true
	}
	s, ok := slugSentinels[e.Slug]
	return ok && s == target
}

// defaultSlug is the slug upstream gives a status with no specific slug.
func defaultSlug(status int) string {
	switch status {
	case http.StatusBadRequest:
		return SlugSchemaViolation
	case http.StatusNotFound:
		return SlugUnknownRoot
	case http.StatusConflict:
		return SlugAliasCollision
	case http.StatusRequestEntityTooLarge:
		return SlugTooLarge
	case http.StatusGone:
		return SlugGone
	case http.StatusMethodNotAllowed:
		return SlugMethodNotAllowed
	case http.StatusRequestedRangeNotSatisfiable:
		return SlugRangeNotSatisfiable
	case http.StatusPreconditionFailed:
		return SlugPreconditionFailed
	case http.StatusServiceUnavailable:
		return SlugStorageUnavailable
	case http.StatusUnauthorized:
		return SlugUnauthorized
	}
	return SlugInternal
}

// errorf builds an Error with the default slug of status.
func errorf(status int, format string, args ...any) *Error {
	return &Error{
		Status:    status,
		Slug:      defaultSlug(status),
		Message:   fmt.Sprintf(format, args...),
		Retryable: status >= 500,
	}
}

// badRequest is a 400 schema_violation.
func badRequest(format string, args ...any) *Error {
	return errorf(http.StatusBadRequest, format, args...)
}

// notFoundAs gives a store.ErrNotFound the route's 404 slug (unknown_root on
// rid routes, unknown_cid on cid routes) and leaves other errors alone.
func notFoundAs(err error, slug string) error {
	if errors.Is(err, store.ErrNotFound) {
		return &Error{Status: http.StatusNotFound, Slug: slug, Message: err.Error(), err: err}
	}
	return err
}

// errorFor maps a handler error to its answer: an *Error as is, then the
// body-size limit, then the store's sentinels through store.Slug.
func errorFor(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return &Error{Status: http.StatusRequestEntityTooLarge, Slug: SlugTooLarge,
			Message: fmt.Sprintf("request body exceeds %d bytes", tooBig.Limit), err: err}
	}
	out := &Error{Message: err.Error(), err: err}
	switch slug := store.Slug(err); {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		out.Status, out.Slug = http.StatusNotFound, SlugUnknownCID
		if !errors.Is(err, store.ErrNotFound) {
			out.Slug = SlugUnknownRoot
		}
	case searchRefusal(err):
		out.Status, out.Slug, out.Retryable = http.StatusServiceUnavailable, slug, true
	case errors.Is(err, store.ErrClosed), errors.Is(err, store.ErrUnavailable),
		errors.Is(err, ErrClosed), errors.Is(err, context.Canceled),
		errors.Is(err, context.DeadlineExceeded):
		out.Status, out.Slug, out.Retryable = http.StatusServiceUnavailable, SlugStorageUnavailable, true
	case errors.Is(err, store.ErrTooLarge):
		out.Status, out.Slug = http.StatusRequestEntityTooLarge, slug
	case slug != SlugInternal:
		out.Status, out.Slug = http.StatusBadRequest, slug
	default:
		out.Status, out.Slug, out.Retryable = http.StatusInternalServerError, SlugInternal, true
	}
	return out
}

// searchRefusal reports a search refused for the node's load (a 503 that
// says nothing about storage).
func searchRefusal(err error) bool {
	return errors.Is(err, store.ErrBusy) || errors.Is(err, store.ErrSearchTimeout)
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
