package store

import (
	"context"
	"fmt"
)

// Submit checks, verifies (in parallel, skipping claims already stored) and
// stores claims, and returns one result per claim in order once the commit
// is durable. One bad claim never fails the others; the error is for the
// whole call (store closed, ctx done, disk failure) and then nothing of the
// call is acknowledged.
func (s *Store) Submit(ctx context.Context, claims []Claim, opt SubmitOptions) ([]Result, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	n := len(claims)
	if n == 0 {
		return []Result{}, nil
	}
	r := &request{
		kind:    reqSubmit,
		origin:  opt.Origin,
		claims:  claims,
		ids:     make([]ID, n),
		results: make([]Result, n),
		rids:    opt.RIDs,
	}
	skip := make([]bool, n)
	now := s.cfg.Now()
	loaded := s.syncLoaded.Load()
	for i := range claims {
		c := &claims[i]
		id := c.ID()
		r.ids[i] = id
		r.results[i].ID = id
		if err := c.Check(now, s.cfg.MaxSkew); err != nil {
			r.results[i].Outcome, r.results[i].Err = Rejected, err
			skip[i] = true
			continue
		}
		if opt.Verified {
			skip[i] = true
			continue
		}
		// A claim whose (ts, id) is in the sync set is stored: the same
		// payload was verified when it was stored, so it is not verified
		// again. Should it no longer be stored when the writer gets to
		// it, the writer verifies it before storing.
		if loaded && s.sync.Has(SyncItem{TS: c.TS, ID: id}) {
			skip[i] = true
			if r.recheck == nil {
				r.recheck = make([]bool, n)
			}
			r.recheck[i] = true
		}
	}
	if !opt.Verified {
		errs := VerifyAll(claims, r.ids, skip)
		for i, err := range errs {
			if err != nil {
				r.results[i].Outcome, r.results[i].Err = Rejected, err
			}
		}
	}
	if err := s.do(ctx, r); err != nil {
		return nil, fmt.Errorf("submit: %w", err)
	}
	return r.results, nil
}
