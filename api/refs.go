package api

import (
	"fmt"
	"net/http"
	"strings"

	gocid "github.com/ipfs/go-cid"

	"github.com/metanode/metanode/store"
)

// notARefError is a path segment under which no record can be: not a rid
// or a cid, or a cid written otherwise than canonically (the store holds
// only canonical cids). The lookup routes answer it 404 with their slug
// (as upstream, which answered 404 for any cid not in its index, and as
// http-api.md says; consumers read 404 as "not known"); it matches
// store.ErrNotFound, and the message says what the segment is not, naming
// the canonical form when there is one.
type notARefError struct{ h, why string }

func (e *notARefError) Error() string {
	return fmt.Sprintf("no record: %q %s", e.h, e.why)
}

func (e *notARefError) Is(target error) bool { return target == store.ErrNotFound }

// refKind says what a route's path segment may name.
type refKind int

const (
	cidOnly  refKind = iota // /file/{cid}, /api/file/{cid}/info
	ridOrCID                // /meta/{h}, /api/metadata/{rid}, /api/meta/{cid}
)

// recordRef checks the record reference of a read route and returns it in
// the form the store looks up: a rid upper-cased (Crockford base32 reads
// either case), a canonical cid as is. Anything else is a *notARefError:
// a segment that parses as a CID but is written otherwise (another base,
// upper case, bits past the end) says "is not in canonical form; the
// canonical form is …", so a consumer that asked in base58 learns how to
// ask; writes refuse the same cid with 400 bad_cid (claims.md).
func recordRef(h string, kind refKind) (string, error) {
	if kind == ridOrCID {
		if up := strings.ToUpper(h); store.IsRID(up) {
			return up, nil
		}
	}
	err := store.CheckCID(h)
	if err == nil {
		return h, nil
	}
	c, perr := gocid.Decode(h)
	switch {
	case perr != nil:
		what := "a cid"
		if kind == ridOrCID {
			what = "a rid or a cid"
		}
		return "", &notARefError{h: h, why: "is not " + what}
	case c.String() != h:
		return "", &notARefError{h: h, why: fmt.Sprintf("is not in canonical form; the canonical form is %q", c.String())}
	}
	// Canonical but refused all the same (longer than store.MaxCIDBytes):
	// no claim can name it.
	return "", &notARefError{h: h, why: fmt.Sprintf("is a cid no claim can name (%v)", err)}
}

// lookupRef returns h as the store looks it up (a lower-case rid
// upper-cased) without checking it: the check costs more than the lookup
// (a base32 decode and re-encode), and the store holds only canonical
// cids, so a hit needs none. A miss goes through missError.
func lookupRef(h string, kind refKind) string {
	if kind == ridOrCID && len(h) == 26 {
		if up := strings.ToUpper(h); store.IsRID(up) {
			return up
		}
	}
	return h
}

// missError is the answer when the store found nothing under h: the
// route's 404, with recordRef's message when h cannot name a record.
// Other errors pass unchanged.
func missError(h string, kind refKind, err error, notFound string) error {
	if !isNotFound(err) {
		return err
	}
	if _, rerr := recordRef(h, kind); rerr != nil {
		return refError(rerr, notFound)
	}
	return notFoundAs(err, notFound)
}

// refError is the answer for a recordRef failure: the route's 404 slug.
func refError(err error, notFound string) error {
	return &Error{Status: http.StatusNotFound, Slug: notFound, Message: err.Error(), err: err}
}
