package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	gocid "github.com/ipfs/go-cid"

	"github.com/metanode/metanode/store"
)

// notARefError is a path segment that is neither a rid nor a cid: no
// record can have it, so the lookup routes answer 404 (as upstream) and
// it matches store.ErrNotFound, but the message says what the segment is
// not.
type notARefError struct{ h, what string }

func (e *notARefError) Error() string {
	return fmt.Sprintf("no record: %q is not %s", e.h, e.what)
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
// either case), a cid as is. A segment that parses as a CID but is not
// written canonically is a 400 bad_cid naming the canonical form, the same
// answer POST /api/claims gives; a consumer that asked in another base
// would otherwise read "no record" for content the node holds. Anything
// else is a *notARefError.
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
	if _, perr := gocid.Decode(h); perr == nil {
		return "", err // parses: not canonical (or too long); err says how to write it
	}
	what := "a cid"
	if kind == ridOrCID {
		what = "a rid or a cid"
	}
	return "", &notARefError{h: h, what: what}
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

// missError is the answer when the store found nothing under h: what
// recordRef says when h cannot name anything (400 bad_cid, or a 404 saying
// it is no id), else the store's 404 with the route's slug. Other errors
// pass unchanged.
func missError(h string, kind refKind, err error, notFound string) error {
	if !isNotFound(err) {
		return err
	}
	if _, rerr := recordRef(h, kind); rerr != nil {
		return refError(rerr, notFound)
	}
	return notFoundAs(err, notFound)
}

// refError is the answer for a recordRef failure: 400 bad_cid for a
// non-canonical cid, else the route's 404 slug.
func refError(err error, notFound string) error {
	var nr *notARefError
	if errors.As(err, &nr) {
		return &Error{Status: http.StatusNotFound, Slug: notFound, Message: err.Error(), err: err}
	}
	return err // errorFor maps store.ErrBadCID to 400 bad_cid
}
