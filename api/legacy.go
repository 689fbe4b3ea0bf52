package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metanode/metanode/store"
)

// The single-box core's write routes (PATCH /meta/{h}, …) take unsigned
// writes from local services. Each becomes claims signed by the node's
// legacy writer key (Config.LegacySigner) and goes through Node.SubmitClaims
// like any local write: the key is trusted and vouched for as a local
// writer, its claims are stored durably and shared. A delete withdraws the
// legacy writer's own votes (retractions); what other signers said stays.
// docs/http.md "Legacy writes".

// Answers of the legacy routes, in upstream's shapes.
type (
	// LegacyMetaResponse answers PUT, PATCH and DELETE /meta/{h}, PUT and
	// DELETE /meta/{h}/{key…} and POST /meta/{h}/_add/{key…}; each route
	// fills the fields upstream's did.
	LegacyMetaResponse struct {
		Success  bool   `json:"success"`
		HashID   string `json:"hashId"`
		Updated  *int   `json:"updated,omitempty"`  // PATCH: keys in the body
		Deleted  *int   `json:"deleted,omitempty"`  // DELETE /meta/{h}: keys withdrawn
		Property string `json:"property,omitempty"` // the key routes
		Added    *bool  `json:"added,omitempty"`    // _add
	}
	// LegacyMetadataResponse answers PUT and DELETE /api/metadata/{id} and
	// PUT /api/metadata/{id}/property.
	LegacyMetadataResponse struct {
		Status      string  `json:"status"` // "ok"
		HashID      string  `json:"hashId"`
		Message     string  `json:"message,omitempty"`
		DeletedKeys *int    `json:"deletedKeys,omitempty"`
		Property    string  `json:"property,omitempty"`
		Value       *string `json:"value,omitempty"`
	}
	// LegacyBatchResponse answers POST /api/metadata/batch.
	LegacyBatchResponse struct {
		Status  string              `json:"status"` // "completed"
		Total   int                 `json:"total"`
		Success int                 `json:"success"`
		Errors  int                 `json:"errors"`
		Results []LegacyBatchResult `json:"results"`
	}
	// LegacyBatchResult is one update's outcome: status "ok" or "error".
	LegacyBatchResult struct {
		HashID string `json:"hashId"`
		Status string `json:"status"`
		Error  string `json:"error,omitempty"`
	}
)

// legacyBatchRequest is the body of POST /api/metadata/batch.
type legacyBatchRequest struct {
	Updates []struct {
		HashID     string            `json:"hashId"`
		Metadata   map[string]string `json:"metadata"`
		Properties map[string]string `json:"properties"`
	} `json:"updates"`
}

// legacyPropertyRequest is the body of PUT /api/metadata/{id}/property.
type legacyPropertyRequest struct {
	Property string `json:"property"`
	Value    string `json:"value"`
}

// legacyOp is one record's change: keys to set, keys (or all of them) to
// withdraw. ref is a rid or a canonical cid.
type legacyOp struct {
	ref        string
	set        map[string]string
	retract    []string
	retractAll bool
}

// legacyWriter signs legacy writes. Every write gets a ts later than the
// one before it and than the writer's claims already on the record, so a
// write never loses to an earlier one by (ts, id), even within one
// millisecond or after the clock stepped back.
type legacyWriter struct {
	signer *store.Signer
	last   atomic.Uint64 // the latest ts given a write
	addMu  sync.Mutex    // an _add reads the value it extends
}

func (w *legacyWriter) nextTS(floor uint64) uint64 {
	for {
		cur := w.last.Load()
		ts := max(uint64(time.Now().UnixMilli()), cur+1, floor+1)
		if w.last.CompareAndSwap(cur, ts) {
			return ts
		}
	}
}

// legacyRoutes registers the legacy write routes: signed writes when the
// node holds a legacy writer key, else 410 gone (legacy-writes: refuse).
func (s *Server) legacyRoutes() {
	routes := []struct {
		pattern string
		h       handlerFunc
	}{
		{"PUT /meta/{h}", s.handleLegacyPutMeta},
		{"PATCH /meta/{h}", s.handleLegacyPatchMeta},
		{"DELETE /meta/{h}", s.handleLegacyDeleteMeta},
		{"PUT /meta/{h}/{key...}", s.handleLegacyPutField},
		{"DELETE /meta/{h}/{key...}", s.handleLegacyDeleteField},
		// The bare _add too: the pattern below alone makes the mux
		// redirect /_add to /_add/, which ServeHTTP strips again (a loop).
		{"POST /meta/{h}/_add/{key...}", s.handleLegacyAdd},
		{"POST /meta/{h}/_add", s.handleLegacyAdd},
		{"PUT /api/metadata/{id}", s.handleLegacyPutMetadata},
		{"DELETE /api/metadata/{id}", s.handleLegacyDeleteMetadata},
		{"PUT /api/metadata/{id}/property", s.handleLegacyPutProperty},
		{"POST /api/metadata/batch", s.handleLegacyBatch},
	}
	for _, r := range routes {
		if s.legacy == nil {
			s.handleOpen(r.pattern, handleGone) // answers 410 whoever asks: nothing to guard
			continue
		}
		s.handle(r.pattern, r.h)
	}
}

func handleGone(w http.ResponseWriter, r *http.Request) error {
	return errorf(http.StatusGone,
		"%s %s was refused: this node takes no unsigned writes (legacy-writes: refuse); write signed claims with POST /api/claims",
		r.Method, r.URL.Path)
}

// readFlatMap reads a body that is one JSON object of string values; a
// value of another type is a 400 naming its key.
func readFlatMap(w http.ResponseWriter, r *http.Request) (map[string]string, error) {
	var raw map[string]json.RawMessage
	if err := decodeBody(w, r, MaxClaimsBody, &raw); err != nil {
		return nil, err
	}
	if len(raw) > MaxClaims {
		return nil, errorf(http.StatusRequestEntityTooLarge, "%d keys in one write: at most %d", len(raw), MaxClaims)
	}
	m := make(map[string]string, len(raw))
	for k, v := range raw {
		var s string // null stays "", as upstream's decode left it
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, badRequest("field %q must be a string, not %s", k, jsonKindOf(v))
		}
		m[k] = s
	}
	return m, nil
}

// jsonKindOf names the JSON type of a raw value, with its article.
func jsonKindOf(v json.RawMessage) string {
	switch b := strings.TrimSpace(string(v)); {
	case b == "true" || b == "false":
		return "a boolean"
	case strings.HasPrefix(b, "{"):
		return "an object"
	case strings.HasPrefix(b, "["):
		return "an array"
	case strings.HasPrefix(b, `"`):
		return "a string"
	}
	return "a number"
}

// readValue reads the body of PUT /meta/{h}/{key…} and _add as upstream:
// a JSON object's "value" when it has one as a string, else the raw text.
func readValue(w http.ResponseWriter, r *http.Request) (string, error) {
	body, err := readBody(w, r, maxSmallBody)
	if err != nil {
		return "", err
	}
	var v struct {
		Value *string `json:"value"`
	}
	if json.Unmarshal(body, &v) == nil && v.Value != nil {
		return *v.Value, nil
	}
	return string(body), nil
}

// legacyRef checks a legacy write's record reference: a rid (either case)
// or a canonical cid. Anything else is a 400 bad_cid saying why (a cid in
// another form names its canonical one): no claim can be written there.
func legacyRef(h string) (string, error) {
	ref, err := recordRef(h, ridOrCID)
	if err != nil {
		return "", &Error{Status: http.StatusBadRequest, Slug: "bad_cid", Message: err.Error(), err: store.ErrBadCID}
	}
	return ref, nil
}

func (s *Server) handleLegacyPatchMeta(w http.ResponseWriter, r *http.Request) error {
	return s.legacyFlat(w, r, func(rid string, n int) any {
		return LegacyMetaResponse{Success: true, HashID: rid, Updated: &n}
	})
}

func (s *Server) handleLegacyPutMeta(w http.ResponseWriter, r *http.Request) error {
	return s.legacyFlat(w, r, func(rid string, _ int) any {
		return LegacyMetaResponse{Success: true, HashID: rid}
	})
}

func (s *Server) handleLegacyPutMetadata(w http.ResponseWriter, r *http.Request) error {
	return s.legacyFlat(w, r, func(rid string, _ int) any {
		return LegacyMetadataResponse{Status: "ok", HashID: rid, Message: "Metadata updated successfully"}
	})
}

// legacyFlat sets the keys of a flat body on the record named in the path
// ({h} or {id}): upstream's PUT and PATCH both set the keys given and left
// the others. PUT /api/metadata/{id} drops processingStatus as upstream.
func (s *Server) legacyFlat(w http.ResponseWriter, r *http.Request, answer func(rid string, keys int) any) error {
	ref, err := legacyRef(pathRef(r))
	if err != nil {
		return err
	}
	m, err := readFlatMap(w, r)
	if err != nil {
		return err
	}
	n := len(m)
	if r.PathValue("id") != "" {
		delete(m, "processingStatus")
	}
	rid, err := s.legacyApply(r.Context(), legacyOp{ref: ref, set: m})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, answer(rid, n))
}

func pathRef(r *http.Request) string {
	if h := r.PathValue("h"); h != "" {
		return h
	}
	return r.PathValue("id")
}

func (s *Server) handleLegacyDeleteMeta(w http.ResponseWriter, r *http.Request) error {
	rid, n, err := s.legacyDeleteAll(r)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, LegacyMetaResponse{Success: true, HashID: rid, Deleted: &n})
}

func (s *Server) handleLegacyDeleteMetadata(w http.ResponseWriter, r *http.Request) error {
	rid, n, err := s.legacyDeleteAll(r)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, LegacyMetadataResponse{Status: "ok", HashID: rid, DeletedKeys: &n})
}

// legacyDeleteAll withdraws every vote of the legacy writer on the record,
// and says how many keys that was. A record it cannot name, or does not
// know, has nothing to withdraw: 200 and 0, as upstream.
func (s *Server) legacyDeleteAll(r *http.Request) (string, int, error) {
	h := pathRef(r)
	ref, err := recordRef(h, ridOrCID)
	if err != nil {
		return h, 0, nil
	}
	t, err := s.legacyTarget(r.Context(), ref)
	if isNotFound(err) {
		return h, 0, nil
	}
	if err != nil {
		return "", 0, err
	}
	if err := s.legacySubmit(r.Context(), t.retractions(s.legacy.signer, nil, s.legacy.nextTS(t.maxTS))); err != nil {
		return "", 0, err
	}
	return cmp.Or(t.rid, h), len(t.own), nil
}

func (s *Server) handleLegacyPutField(w http.ResponseWriter, r *http.Request) error {
	ref, err := legacyRef(r.PathValue("h"))
	if err != nil {
		return err
	}
	key := r.PathValue("key")
	v, err := readValue(w, r)
	if err != nil {
		return err
	}
	rid, err := s.legacyApply(r.Context(), legacyOp{ref: ref, set: map[string]string{key: v}})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, LegacyMetaResponse{Success: true, HashID: rid, Property: key})
}

func (s *Server) handleLegacyPutProperty(w http.ResponseWriter, r *http.Request) error {
	ref, err := legacyRef(r.PathValue("id"))
	if err != nil {
		return err
	}
	var req legacyPropertyRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		return err
	}
	if req.Property == "" {
		return badRequest("property is required")
	}
	rid, err := s.legacyApply(r.Context(), legacyOp{ref: ref, set: map[string]string{req.Property: req.Value}})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, LegacyMetadataResponse{Status: "ok", HashID: rid, Property: req.Property,
		Value: &req.Value, Message: "Property updated successfully"})
}

func (s *Server) handleLegacyDeleteField(w http.ResponseWriter, r *http.Request) error {
	h, key := r.PathValue("h"), r.PathValue("key")
	rid := h
	if ref, err := recordRef(h, ridOrCID); err == nil {
		t, err := s.legacyTarget(r.Context(), ref)
		switch {
		case err == nil:
			if err := s.legacySubmit(r.Context(), t.retractions(s.legacy.signer, []string{key}, s.legacy.nextTS(t.maxTS))); err != nil {
				return err
			}
			rid = cmp.Or(t.rid, h)
		case !isNotFound(err):
			return err
		}
	}
	return writeJSON(w, http.StatusOK, LegacyMetaResponse{Success: true, HashID: rid, Property: key})
}

// handleLegacyAdd adds a value to a key holding a "|"-separated set, as
// upstream's AddToSet: added is false when the value is there already.
func (s *Server) handleLegacyAdd(w http.ResponseWriter, r *http.Request) error {
	ref, err := legacyRef(r.PathValue("h"))
	if err != nil {
		return err
	}
	key := r.PathValue("key")
	if key == "" {
		return badRequest("key is required: POST /meta/{h}/_add/{key}")
	}
	v, err := readValue(w, r)
	if err != nil {
		return err
	}
	if v == "" {
		return badRequest("value is required")
	}
	s.legacy.addMu.Lock()
	defer s.legacy.addMu.Unlock()
	cur, err := s.cfg.Store.Field(r.Context(), ref, key)
	if err != nil && !isNotFound(err) {
		return err
	}
	var vals []string
	if cur != "" {
		vals = strings.Split(cur, "|")
	}
	added := !slices.Contains(vals, v)
	rid := ref
	if added {
		if rid, err = s.legacyApply(r.Context(), legacyOp{ref: ref, set: map[string]string{key: strings.Join(append(vals, v), "|")}}); err != nil {
			return err
		}
	} else if got, err := s.cfg.Store.Resolve(r.Context(), ref); err == nil {
		rid = got
	}
	return writeJSON(w, http.StatusOK, LegacyMetaResponse{Success: true, HashID: rid, Property: key, Added: &added})
}

func (s *Server) handleLegacyBatch(w http.ResponseWriter, r *http.Request) error {
	var req legacyBatchRequest
	if err := decodeBody(w, r, MaxClaimsBody, &req); err != nil {
		return err
	}
	if len(req.Updates) == 0 {
		return badRequest("updates array is required")
	}
	out := LegacyBatchResponse{Status: "completed", Results: make([]LegacyBatchResult, 0, len(req.Updates))}
	keys := 0
	for _, u := range req.Updates {
		keys += len(u.Metadata) + len(u.Properties)
	}
	if keys > MaxClaims {
		return errorf(http.StatusRequestEntityTooLarge, "%d keys in one batch: at most %d", keys, MaxClaims)
	}
	// Each update is prepared on its own, so one bad update fails alone;
	// the good ones are stored in one local write.
	var all []store.Claim
	type prepared struct {
		res    int // index in out.Results
		target legacyTarget
		from   int // its claims are all[from:to]
		to     int
	}
	var ok []prepared
	for _, u := range req.Updates {
		res := LegacyBatchResult{HashID: u.HashID, Status: "ok"}
		if u.HashID == "" {
			res.HashID, res.Status, res.Error = "unknown", "error", "Missing hash ID"
			out.Results = append(out.Results, res)
			continue
		}
		set := maps.Clone(u.Metadata)
		delete(set, "processingStatus")
		if set == nil {
			set = map[string]string{}
		}
		maps.Copy(set, u.Properties) // upstream set properties after metadata
		t, claims, err := s.legacyPrepare(r.Context(), u.HashID, legacyOp{set: set})
		if err != nil {
			res.Status, res.Error = "error", errorFor(err).Message
		} else {
			ok = append(ok, prepared{res: len(out.Results), target: t, from: len(all), to: len(all) + len(claims)})
			all = append(all, claims...)
		}
		out.Results = append(out.Results, res)
	}
	var results []store.Result
	if len(all) > 0 {
		var err error
		if results, err = s.cfg.Node.SubmitClaims(r.Context(), all); err != nil {
			return err
		}
	}
	for _, p := range ok {
		if err := legacyOutcome(all[p.from:p.to], results[p.from:p.to]); err != nil {
			out.Results[p.res].Status, out.Results[p.res].Error = "error", errorFor(err).Message
			continue
		}
		out.Results[p.res].HashID = s.ridAfter(r.Context(), p.target, out.Results[p.res].HashID)
	}
	for _, res := range out.Results {
		if res.Status == "ok" {
			out.Success++
		} else {
			out.Errors++
		}
	}
	out.Total = len(out.Results)
	return writeJSON(w, http.StatusOK, out)
}

// legacyApply signs and stores one record's change and returns the rid of
// the record that holds it.
func (s *Server) legacyApply(ctx context.Context, op legacyOp) (string, error) {
	t, claims, err := s.legacyPrepare(ctx, op.ref, op)
	if err != nil {
		return "", err
	}
	if err := s.legacySubmit(ctx, claims); err != nil {
		return "", err
	}
	return s.ridAfter(ctx, t, op.ref), nil
}

// ridAfter is the rid that holds the target after a write: a cid no record
// held before has one now (unless nothing was written).
func (s *Server) ridAfter(ctx context.Context, t legacyTarget, fallback string) string {
	if t.rid != "" {
		return t.rid
	}
	if rid, err := s.cfg.Store.Resolve(ctx, t.cid); err == nil {
		return rid
	}
	return fallback
}

// legacyPrepare resolves h and signs op's claims, checked as the store
// will check them: a key no claim may carry refuses the whole change
// before anything is stored.
func (s *Server) legacyPrepare(ctx context.Context, h string, op legacyOp) (legacyTarget, []store.Claim, error) {
	ref, err := legacyRef(h)
	if err != nil {
		return legacyTarget{}, nil, err
	}
	t, err := s.legacyTarget(ctx, ref)
	if err != nil {
		return legacyTarget{}, nil, notFoundAs(err, SlugUnknownRoot)
	}
	ts := s.legacy.nextTS(t.maxTS)
	claims := make([]store.Claim, 0, len(op.set))
	for _, k := range slices.Sorted(maps.Keys(op.set)) {
		switch {
		case store.IsLocalKey(k) && k != "sizeByte":
			continue // the watcher's box-local facts: never signed
		case k == store.LinkPrefix+t.cid:
			continue // a record holds its own cid: nothing to link
		case strings.HasPrefix(k, store.VouchPrefix):
			return t, nil, fmt.Errorf("%w: %q: a vouch is a trust decision, made with PUT /api/trust/{uid}, never by a legacy write", store.ErrReservedKey, k)
		}
		c := s.legacy.signer.Text(t.cid, k, op.set[k], ts)
		if err := c.Check(time.Now(), 0); err != nil {
			return t, nil, fmt.Errorf("key %q: %w", k, err)
		}
		claims = append(claims, c)
	}
	if op.retractAll || len(op.retract) > 0 {
		claims = append(claims, t.retractions(s.legacy.signer, op.retract, ts)...)
	}
	return t, claims, nil
}

// legacySubmit stores claims as a local write; a claim the store refused
// is the answer's error.
func (s *Server) legacySubmit(ctx context.Context, claims []store.Claim) error {
	if len(claims) == 0 {
		return nil
	}
	res, err := s.cfg.Node.SubmitClaims(ctx, claims)
	if err != nil {
		return err
	}
	return legacyOutcome(claims, res)
}

func legacyOutcome(claims []store.Claim, res []store.Result) error {
	for i := range res {
		switch res[i].Outcome {
		case store.Rejected:
			err := fmt.Errorf("key %q: %w", claims[i].Key, res[i].Err)
			if errors.Is(res[i].Err, store.ErrUntrusted) {
				err = fmt.Errorf("%w (the legacy writer %s is not trusted: metanode trust add %s, or auto-trust-local: true)",
					err, claims[i].UID, claims[i].UID)
			}
			return err
		case store.Stale:
			return fmt.Errorf("key %q: a later vote of the legacy writer is stored (clock far behind?): %w", claims[i].Key, store.ErrUnavailable)
		}
	}
	return nil
}

// legacyTarget is where a legacy write lands: the record's rid ("" for a
// cid no record holds yet), the cid new votes name (the cid asked for, or
// a rid's canonical cid), and the legacy writer's stored votes on the
// record by key (their latest ts bounds the next write's from below).
type legacyTarget struct {
	rid   string
	cid   string
	own   map[string][]store.Claim // live votes (text or ciphertext)
	maxTS uint64                   // of every vote, retractions included
}

func (s *Server) legacyTarget(ctx context.Context, ref string) (legacyTarget, error) {
	t := legacyTarget{cid: ref}
	if store.IsRID(ref) {
		rec, err := s.cfg.Store.Record(ctx, ref, "")
		if err != nil {
			return t, err
		}
		t.rid, t.cid = rec.RID, rec.CanonicalCID
	} else if rid, err := s.cfg.Store.Resolve(ctx, ref); err == nil {
		t.rid = rid
	} else if !isNotFound(err) {
		return t, err
	}
	claims, err := s.cfg.Store.FetchClaims(ctx, t.cid) // the whole group's
	if err != nil {
		return t, err
	}
	uid := s.legacy.signer.UID()
	t.own = map[string][]store.Claim{}
	for _, c := range claims {
		if c.UID != uid {
			continue
		}
		t.maxTS = max(t.maxTS, c.TS)
		if c.Kind != store.KindRetraction {
			t.own[c.Key] = append(t.own[c.Key], c)
		}
	}
	return t, nil
}

// retractions withdraws the legacy writer's live votes on keys (nil: on
// every key), on each cid of the record that holds one.
func (t legacyTarget) retractions(signer *store.Signer, keys []string, ts uint64) []store.Claim {
	if keys == nil {
		keys = slices.Sorted(maps.Keys(t.own))
	}
	var out []store.Claim
	for _, k := range keys {
		for _, c := range t.own[k] {
			out = append(out, signer.Retraction(c.CID, c.Key, ts))
		}
	}
	return out
}
