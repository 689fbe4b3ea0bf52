package api

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"sync"

	"github.com/metanode/metanode/store"
)

// ClaimsRequest is the body of POST /api/claims.
type ClaimsRequest struct {
	Claims []store.ClaimJSON `json:"claims"`
}

// ClaimResult is the outcome of one submitted claim. ID is empty when the
// claim could not be decoded far enough to have one.
type ClaimResult struct {
	ID      string `json:"id"`
	Status  string `json:"status"`            // accepted, unchanged, stale or rejected
	Error   string `json:"error,omitempty"`   // the slug, when rejected
	Message string `json:"message,omitempty"` // why, when rejected
}

// ClaimsResponse is the answer of POST /api/claims: one result per claim,
// in request order, and the count of each outcome.
type ClaimsResponse struct {
	Results   []ClaimResult `json:"results"`
	Accepted  int           `json:"accepted"`
	Unchanged int           `json:"unchanged"`
	Stale     int           `json:"stale"`
	Rejected  int           `json:"rejected"`
}

// add counts one result and appends it.
func (cr *ClaimsResponse) add(r ClaimResult) {
	switch r.Status {
	case "accepted":
		cr.Accepted++
	case "unchanged":
		cr.Unchanged++
	case "stale":
		cr.Stale++
	default:
		cr.Rejected++
	}
	cr.Results = append(cr.Results, r)
}

// GroupClaimsResponse is the answer of GET /api/meta/{cid}/claims and
// GET /api/metadata/{rid}/claims.
type GroupClaimsResponse struct {
	RID    string            `json:"rid"`
	CIDs   []string          `json:"cids"`
	Claims []store.ClaimJSON `json:"claims"` // each with its id
}

// MergeRequest is the body of POST /api/merge.
type MergeRequest struct {
	Claims []json.RawMessage `json:"claims"`
	As     string            `json:"as,omitempty"`
}

// MergeRejection names one refused input claim of POST /api/merge.
type MergeRejection struct {
	Index   int    `json:"index"`
	Error   string `json:"error"`   // slug
	Message string `json:"message"` // why
}

// MergeResponse is the answer of POST /api/merge.
type MergeResponse struct {
	Fields   map[string]string `json:"fields"`
	NSrc     map[string]int    `json:"nsrc"`
	Rejected []MergeRejection  `json:"rejected"`
}

// decodedClaim is one slot of a batch: the claim, or why it did not decode.
type decodedClaim struct {
	claim store.Claim
	err   error
	id    string // known even for some failures (a bad signature)
}

// readClaims reads a claims batch body (readClaimsBody) and decodes each
// claim.
func readClaims(w http.ResponseWriter, r *http.Request) ([]decodedClaim, error) {
	raws, err := readClaimsBody(w, r, nil)
	if err != nil {
		return nil, err
	}
	return decodeClaims(raws), nil
}

// bodyError is the answer for a body the decoder refused: 413 when it hit
// the size limit (errorFor maps it), else 400.
func bodyError(err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return err
	}
	return badRequest("%s", describeJSON(err, "body"))
}

// tooManyClaims is the 413 for a batch past MaxClaims; the reader stops
// at the first claim too many, so the count is not known.
func tooManyClaims() *Error {
	return errorf(http.StatusRequestEntityTooLarge, "more than %d claims in one request: send at most %d per request", MaxClaims, MaxClaims)
}

// decodeClaims decodes each claim on its own with encoding/json, on all
// cores for a big batch.
func decodeClaims(raws []json.RawMessage) []decodedClaim {
	out := make([]decodedClaim, len(raws))
	parallel(len(raws), func(i int) { out[i] = decodeClaim(raws[i]) })
	return out
}

// parallel runs fn(0..n-1) on all cores in chunks (at least 256 items each).
func parallel(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), (n+255)/256)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				fn(i)
			}
		})
	}
	wg.Wait()
}

func decodeClaim(raw json.RawMessage) decodedClaim {
	if err := store.CheckJSONText(raw); err != nil {
		return decodedClaim{err: err}
	}
	var j store.ClaimJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return decodedClaim{err: fmt.Errorf("%w: %s", store.ErrMalformed, describeJSON(err, "claim"))}
	}
	if err := checkTS(j.TS); err != nil {
		return decodedClaim{err: err}
	}
	return claimFromJSON(&j)
}

// checkTS says so when ts is an integer too large for a timestamp (the
// store's message would call it not a non-negative integer); other wrong
// shapes are the store's to describe.
func checkTS(raw json.RawMessage) error {
	ts := bytes.TrimSpace(raw)
	if len(ts) == 0 || bytes.ContainsFunc(ts, func(r rune) bool { return r < '0' || r > '9' }) {
		return nil
	}
	if _, err := strconv.ParseUint(string(ts), 10, 64); err != nil {
		return fmt.Errorf("%w: ts %s is out of range (0 to %d milliseconds)", store.ErrMalformed, ts, uint64(math.MaxUint64))
	}
	return nil
}

// claimFromJSON converts the JSON form; the id is known even when only
// the signature failed.
func claimFromJSON(j *store.ClaimJSON) decodedClaim {
	c, err := j.Claim()
	if err != nil {
		d := decodedClaim{err: err}
		if errors.Is(err, store.ErrBadSignature) { // everything but the signature decoded
			d.id = c.ID().String()
		}
		return d
	}
	return decodedClaim{claim: c, id: c.ID().String()}
}

func rejected(id string, err error) ClaimResult {
	return ClaimResult{ID: id, Status: store.Rejected.String(), Error: store.Slug(err), Message: err.Error()}
}

// claimsRequest is what a POST /api/claims body holds besides its claims.
type claimsRequest struct {
	// RIDs names, by cid, the rid a record new to the node is to take
	// (store.SubmitOptions.RIDs): metanode import keeps the rids of the
	// store it imports. At most MaxClaims entries.
	RIDs map[string]string `json:"rids"`
}

// check refuses rids that could never be taken: a bad cid or rid is the
// writer's mistake, not something to ignore quietly.
func (q *claimsRequest) check() error {
	if len(q.RIDs) > MaxClaims {
		return badRequest("rids: %d entries, at most %d", len(q.RIDs), MaxClaims)
	}
	for cid, rid := range q.RIDs {
		if err := store.CheckCID(cid); err != nil {
			return badRequest("rids: %v", err)
		}
		if !store.IsRID(rid) {
			return badRequest("rids: %q (for %s) is not a rid: 26 upper-case Crockford base32 characters, the first 0-7", rid, cid)
		}
	}
	return nil
}

func (s *Server) handlePostClaims(w http.ResponseWriter, r *http.Request) error {
	var req claimsRequest
	raws, err := readClaimsBody(w, r, &req)
	if err != nil {
		return err
	}
	if err := req.check(); err != nil {
		return err
	}
	decoded := decodeClaims(raws)
	claims := make([]store.Claim, 0, len(decoded))
	for _, d := range decoded {
		if d.err == nil {
			claims = append(claims, d.claim)
		}
	}
	var results []store.Result
	if len(claims) > 0 {
		if len(req.RIDs) > 0 {
			results, err = s.cfg.Node.ImportClaims(r.Context(), claims, store.SubmitOptions{RIDs: req.RIDs})
		} else {
			results, err = s.cfg.Node.SubmitClaims(r.Context(), claims)
		}
		if err != nil {
			return fmt.Errorf("submit claims: %w", err)
		}
		if len(results) != len(claims) {
			return fmt.Errorf("submit claims: %d results for %d claims", len(results), len(claims))
		}
	}
	out := ClaimsResponse{Results: make([]ClaimResult, 0, len(decoded))}
	next := 0
	for _, d := range decoded {
		if d.err != nil {
			out.add(rejected(d.id, d.err))
			continue
		}
		res := results[next]
		next++
		if res.Outcome == store.Rejected {
			err := res.Err
			if err == nil {
				err = errors.New("rejected")
			}
			out.add(rejected(d.id, err))
			continue
		}
		out.add(ClaimResult{ID: res.ID.String(), Status: res.Outcome.String()})
	}
	s.countClaims(out)
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) countClaims(out ClaimsResponse) {
	for _, c := range []struct {
		outcome string
		n       int
	}{{"accepted", out.Accepted}, {"unchanged", out.Unchanged}, {"stale", out.Stale}, {"rejected", out.Rejected}} {
		if c.n > 0 {
			s.metrics.claims.WithLabelValues(c.outcome).Add(float64(c.n))
		}
	}
}

func (s *Server) handleCIDClaims(w http.ResponseWriter, r *http.Request) error {
	return s.writeGroupClaims(w, r, r.PathValue("cid"), SlugUnknownCID)
}

func (s *Server) handleRIDClaims(w http.ResponseWriter, r *http.Request) error {
	return s.writeGroupClaims(w, r, r.PathValue("rid"), SlugUnknownRoot)
}

func (s *Server) writeGroupClaims(w http.ResponseWriter, r *http.Request, h, notFound string) error {
	h = lookupRef(h, ridOrCID)
	q := r.URL.Query()
	uid := q.Get("uid")
	if uid != "" {
		// As ?as=: a uid that cannot exist is a mistake to report, not an
		// empty list.
		if err := store.CheckUID(uid); err != nil {
			return err
		}
	}
	g, err := s.cfg.Store.Claims(r.Context(), h, store.ClaimFilter{Key: q.Get("key"), UID: uid})
	if err != nil {
		return missError(h, ridOrCID, err, notFound)
	}
	out := GroupClaimsResponse{RID: g.RID, CIDs: nonNil(g.CIDs), Claims: make([]store.ClaimJSON, len(g.Claims))}
	for i := range g.Claims {
		out.Claims[i] = g.Claims[i].ToJSON(true)
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleMerge(w http.ResponseWriter, r *http.Request) error {
	// As POST /api/claims: the claims array is required ({} is a mistake,
	// not an empty merge).
	var req struct {
		As string `json:"as"`
	}
	raws, err := readClaimsBody(w, r, &req)
	if err != nil {
		return err
	}
	as, err := asParam(req.As)
	if err != nil {
		return err
	}
	out := MergeResponse{Rejected: []MergeRejection{}}
	decoded := decodeClaims(raws)
	claims := make([]store.Claim, 0, len(decoded))
	index := make([]int, 0, len(decoded)) // position in claims → position in the request
	for i, d := range decoded {
		if d.err != nil {
			out.Rejected = append(out.Rejected, MergeRejection{Index: i, Error: store.Slug(d.err), Message: d.err.Error()})
			continue
		}
		claims = append(claims, d.claim)
		index = append(index, i)
	}
	res, err := s.cfg.Store.Merge(r.Context(), claims, as)
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	for _, rj := range res.Rejected {
		i := rj.Index
		if i >= 0 && i < len(index) {
			i = index[i]
		}
		msg := "rejected"
		if rj.Err != nil {
			msg = rj.Err.Error()
		}
		out.Rejected = append(out.Rejected, MergeRejection{Index: i, Error: store.Slug(rj.Err), Message: msg})
	}
	sortRejections(out.Rejected)
	out.Fields, out.NSrc = nonNilMap(res.Fields), res.NSrc
	if out.NSrc == nil {
		out.NSrc = map[string]int{}
	}
	return writeJSON(w, http.StatusOK, out)
}

func sortRejections(rs []MergeRejection) {
	slices.SortStableFunc(rs, func(a, b MergeRejection) int { return cmp.Compare(a.Index, b.Index) })
}
