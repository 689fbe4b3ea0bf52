package store

import "errors"

// Rejection reasons. A claim refused for one of these gets the outcome
// Rejected; callers map them to wire slugs with Slug.
var (
	ErrBadSignature    = errors.New("bad signature")
	ErrBadUID          = errors.New("bad uid")
	ErrBadCID          = errors.New("bad cid")
	ErrBadKey          = errors.New("bad key")
	ErrBadValue        = errors.New("bad value")
	ErrDeprecatedField = errors.New("deprecated field")
	ErrReservedKey     = errors.New("reserved key")
	ErrTooLarge        = errors.New("value too large")
	ErrFutureTimestamp = errors.New("timestamp in the future")
	ErrUntrusted       = errors.New("untrusted signer")
	ErrMalformed       = errors.New("malformed claim")
)

// Store-level sentinels.
var (
	ErrNotFound    = errors.New("not found")
	ErrClosed      = errors.New("store closed")
	ErrSchema      = errors.New("unsupported database schema")
	ErrReservedKV  = errors.New("reserved scratch key")
	ErrBadPath     = errors.New("bad path")
	ErrUnavailable = errors.New("storage unavailable")
	ErrDamaged     = errors.New("damaged database file")
)

// Search refusals (docs/http.md "Search").
var (
	ErrQueryTooLong    = errors.New("search query too long")
	ErrFiltersTooLarge = errors.New("search filters too large")
	ErrBusy            = errors.New("too many searches at once")
	ErrSearchTimeout   = errors.New("search took too long")
)

// slugs maps each rejection sentinel to the error slug of the HTTP contract.
var slugs = []struct {
	err  error
	slug string
}{
	{ErrBadSignature, "bad_signature"},
	{ErrBadUID, "bad_uid"},
	{ErrBadCID, "bad_cid"},
	{ErrBadKey, "bad_key"},
	{ErrDeprecatedField, "deprecated_field"},
	{ErrReservedKey, "reserved_key"},
	{ErrTooLarge, "too_large"},
	{ErrFutureTimestamp, "future_timestamp"},
	{ErrUntrusted, "untrusted_signer"},
	{ErrBadValue, "schema_violation"},
	{ErrMalformed, "schema_violation"},
	{ErrReservedKV, "schema_violation"},
	{ErrBadPath, "schema_violation"},
	{ErrNotFound, "unknown_cid"},
	{ErrUnavailable, "storage_unavailable"},
	{ErrClosed, "storage_unavailable"},
	{ErrQueryTooLong, "query_too_long"},
	{ErrFiltersTooLarge, "filters_too_large"},
	{ErrBusy, "busy"},
	{ErrSearchTimeout, "search_timeout"},
}

// Slug returns the contract's error slug for err ("internal" when err is not
// one of the store's sentinels).
func Slug(err error) string {
	for _, s := range slugs {
		if errors.Is(err, s.err) {
			return s.slug
		}
	}
	return "internal"
}
