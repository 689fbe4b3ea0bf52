package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Limits of one search (docs/http.md "Search"). With them, what a search
// reads is bounded by the store's size, never by the request's.
const (
	MaxSearchQuery   = 1024   // bytes of the query text
	MaxSearchTokens  = 32     // whitespace tokens of the query
	MaxSearchFilters = 16     // filters
	MaxSearchValues  = 256    // values of all filters together
	MaxSearchTerm    = 256    // bytes of a filter's property or of one value
	MaxSearchLimit   = 10_000 // records of one page
)

// checkSearch refuses a query past the limits.
func checkSearch(q SearchQuery) error {
	if len(q.Query) > MaxSearchQuery {
		return fmt.Errorf("%w: the query is %d bytes, more than %d", ErrQueryTooLong, len(q.Query), MaxSearchQuery)
	}
	if n := len(strings.Fields(q.Query)); n > MaxSearchTokens {
		return fmt.Errorf("%w: the query has %d words, more than %d", ErrQueryTooLong, n, MaxSearchTokens)
	}
	if len(q.Filters) > MaxSearchFilters {
		return fmt.Errorf("%w: %d filters, more than %d", ErrFiltersTooLarge, len(q.Filters), MaxSearchFilters)
	}
	values := 0
	for i, f := range q.Filters {
		if len(f.Property) > MaxSearchTerm {
			return fmt.Errorf("%w: the property of filter %d is %d bytes, more than %d", ErrFiltersTooLarge, i, len(f.Property), MaxSearchTerm)
		}
		for _, v := range f.Values {
			if len(v) > MaxSearchTerm {
				return fmt.Errorf("%w: a value of filter %d is %d bytes, more than %d", ErrFiltersTooLarge, i, len(v), MaxSearchTerm)
			}
		}
		values += len(f.Values)
	}
	if values > MaxSearchValues {
		return fmt.Errorf("%w: %d values in all, more than %d", ErrFiltersTooLarge, values, MaxSearchValues)
	}
	return nil
}

// Field is one merged field of a record.
type Field struct{ Key, Value string }

// Search returns a page of matching records in rid order and the number of
// hits (SearchEach, collected).
func (s *Store) Search(ctx context.Context, q SearchQuery) ([]SearchHit, int, error) {
	hits := []SearchHit{}
	total, err := s.SearchEach(ctx, q, func(rid string, fields []Field) error {
		m := make(map[string]string, len(fields))
		for _, f := range fields {
			m[f.Key] = f.Value
		}
		hits = append(hits, SearchHit{RID: rid, Fields: m})
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return hits, total, nil
}

// SearchEach runs a search and calls fn with each record of the page, in
// rid order, with its fields in key order (the slice is reused: valid only
// during the call); it returns the number of hits.
//
// A search within the limits (checkSearch) waits for one of the search
// slots (SearchConfig), reads on the search pool's own connections, so
// record reads never wait for it, and has SearchConfig.Timeout to finish,
// fn's work (encoding the answer) included; ctx ending (the client went
// away) stops it, in SQLite too.
func (s *Store) SearchEach(ctx context.Context, q SearchQuery, fn func(rid string, fields []Field) error) (_ int, err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return 0, err
	}
	if err := checkSearch(q); err != nil {
		s.met.searchRefused.WithLabelValues("too_large").Inc()
		return 0, fmt.Errorf("search: %w", err)
	}
	release, err := s.sp.admit.enter(ctx)
	if err != nil {
		if errors.Is(err, ErrBusy) {
			s.met.searchRefused.WithLabelValues("busy").Inc()
		}
		return 0, fmt.Errorf("search: %w", err)
	}
	defer release()
	ctx, cancel := context.WithTimeoutCause(ctx, s.cfg.Search.Timeout, errSearchBudget)
	defer cancel()
	var cost searchCost
	total, err := s.search(ctx, q, &cost, fn)
	s.met.searchRows.Add(float64(cost.rows))
	switch {
	case err == nil:
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), errSearchBudget):
		s.met.searchRefused.WithLabelValues("timeout").Inc()
		return 0, fmt.Errorf("search: %w: it read %d rows in its budget of %s; narrow it (a word of three letters or more, fewer filter values)",
			ErrSearchTimeout, cost.rows, s.cfg.Search.Timeout)
	case ctx.Err() != nil: // the caller went away: whatever failed, that is why
		return 0, fmt.Errorf("search: %w", ctx.Err())
	default:
		return 0, fmt.Errorf("search: %w", err)
	}
	return total, nil
}

// errSearchBudget is the cause of a search's context when its time is up.
var errSearchBudget = errors.New("search budget spent")

// search runs an admitted search in one read transaction of the search
// pool, hands fn the page's records and counts what it reads in cost.
//
// The candidates come from the search table (tokens) and kv_field_v
// (filters), each row checked with the exact matchers; when few remain,
// the remaining filters are checked on each record's fields instead.
// Only the page's records are read whole.
func (s *Store) search(ctx context.Context, q SearchQuery, cost *searchCost, fn func(string, []Field) error) (int, error) {
	if gate := s.sp.gate.Load(); gate != nil {
		if err := (*gate)(ctx); err != nil {
			return 0, err
		}
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, MaxSearchLimit)
	offset := max(q.Offset, 0)
	t, err := beginSearch(ctx, s.sp.db)
	if err != nil {
		return 0, err
	}
	defer t.end()
	t.onRow = s.sp.onRow
	defer func() { *cost = t.cost }()
	rids, all, err := t.candidates(ctx, q, s.sp.each)
	if err != nil {
		return 0, err
	}
	page, total := rids[min(offset, len(rids)):min(offset+limit, len(rids))], len(rids)
	if all {
		if page, total, err = t.rootsPage(ctx, offset, limit); err != nil {
			return 0, err
		}
	}
	return total, t.eachHit(ctx, page, fn)
}

// candidates returns the records matching the query's tokens and
// filters, sorted (all when it has neither: every record). Once no more
// than each are left, the remaining filters are checked on each record's
// fields.
func (t *searchTx) candidates(ctx context.Context, q SearchQuery, each int) (rids []string, all bool, err error) {
	all = true
	if tokens := tokenize(q.Query); len(tokens) > 0 {
		if rids, err = t.tokenSet(ctx, tokens); err != nil {
			return nil, false, err
		}
		all = false
	}
	filters := activeFilters(q.Filters)
	for i, f := range filters {
		if !all && len(rids) <= each {
			rids, err = t.filterEach(ctx, rids, filters[i:])
			return rids, false, err
		}
		set, err := t.filterSet(ctx, f)
		if err != nil {
			return nil, false, err
		}
		if all {
			rids, all = set, false
		} else {
			rids = intersect(rids, set)
		}
	}
	return rids, all, nil
}
