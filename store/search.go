package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Search returns a page of matching records in rid order and the number of hits.
//
// SQL narrows the candidates (the FTS trigram index for query tokens, the
// kv_field_v index for filters), then every candidate's merged record is
// checked in Go with the exact semantics, so the index only ever has to
// give a superset: tokens or values it cannot serve exactly (short or
// non-ASCII) just narrow less.
func (s *Store) Search(ctx context.Context, q SearchQuery) ([]SearchHit, int, error) {
	if err := s.ready(); err != nil {
		return nil, 0, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	offset := max(q.Offset, 0)
	tokens := tokenize(q.Query)
	tx, err := s.cacheR.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, 0, fmt.Errorf("search: %w", err)
	}
	defer tx.Rollback()

	var cands map[string]bool // nil: every record
	narrow := func(set map[string]bool) {
		if cands == nil {
			cands = set
			return
		}
		for r := range cands {
			if !set[r] {
				delete(cands, r)
			}
		}
	}
	if expr := ftsExpr(tokens); expr != "" {
		set, err := collect(ctx, tx, `SELECT rid FROM fts WHERE hay MATCH ?`, expr)
		if err != nil {
			return nil, 0, fmt.Errorf("search: %w", err)
		}
		narrow(set)
	}
	for _, f := range q.Filters {
		if len(f.Values) == 0 || f.Property == "" {
			continue
		}
		set, err := filterCandidates(ctx, tx, f)
		if err != nil {
			return nil, 0, fmt.Errorf("search: %w", err)
		}
		narrow(set)
	}
	var rids []string
	if cands == nil {
		rows, err := tx.QueryContext(ctx, `SELECT substr(k, 11) FROM kv WHERE k >= 'idx:roots/' AND k < 'idx:roots0' ORDER BY k`)
		if err != nil {
			return nil, 0, fmt.Errorf("search: %w", err)
		}
		for rows.Next() {
			var r string
			if err := rows.Scan(&r); err != nil {
				rows.Close()
				return nil, 0, fmt.Errorf("search: %w", err)
			}
			rids = append(rids, r)
		}
		rows.Close()
	} else {
		rids = sortedKeys(cands)
	}
	hits := []SearchHit{}
	total := 0
	for _, rid := range rids {
		fields, err := recordFields(ctx, tx, rid)
		if err != nil {
			return nil, 0, fmt.Errorf("search: %w", err)
		}
		if len(fields) == 0 || !matchTokens(rid, fields, tokens) || !matchFilters(fields, q.Filters) {
			continue
		}
		if total >= offset && len(hits) < limit {
			hits = append(hits, SearchHit{RID: rid, Fields: fields})
		}
		total++
	}
	return hits, total, nil
}

// tokenize splits a query into lower-cased whitespace tokens.
func tokenize(q string) []string { return strings.Fields(strings.ToLower(q)) }

func collect(ctx context.Context, tx *sql.Tx, q string, args ...any) (map[string]bool, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	set := map[string]bool{}
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		set[v] = true
	}
	return set, rows.Err()
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// ftsExpr builds an FTS5 query from the tokens the trigram index can serve
// exactly: ASCII tokens of three characters or more.
func ftsExpr(tokens []string) string {
	var parts []string
	for _, t := range tokens {
		if len(t) >= 3 && isASCII(t) && !strings.ContainsRune(t, 0) { // FTS5 reads a NUL as the end of the query
			parts = append(parts, `"`+strings.ReplaceAll(t, `"`, `""`)+`"`)
		}
	}
	return strings.Join(parts, " AND ")
}

func likeEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(s)
}

// filterCandidates returns the records that may match one filter: for each
// value, those with a key-set member property/value, or a flat property
// whose value contains it.
func filterCandidates(ctx context.Context, tx *sql.Tx, f SearchFilter) (map[string]bool, error) {
	set := map[string]bool{}
	prop := strings.ToLower(f.Property)
	add := func(q string, args ...any) error {
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				return err
			}
			if rid, _, ok := splitFieldKey(k); ok {
				set[rid] = true
			}
		}
		return rows.Err()
	}
	const base = `SELECT k FROM kv WHERE k >= 'file:' AND k < 'file;' AND `
	for _, v := range f.Values {
		lv := strings.ToLower(v)
		var err error
		if isASCII(v) && isASCII(f.Property) {
			err = add(base+`lower(substr(k, 33)) = ?`, prop+"/"+lv)
			if err == nil {
				flat := strings.TrimSpace(lv) // the flat arm compares trimmed values
				// LIKE ignores ASCII case.
				err = add(base+`lower(substr(k, 33)) = ? AND v LIKE ? ESCAPE '\'`, prop, "%"+likeEscape(flat)+"%")
			}
		} else {
			// SQLite folds ASCII only: take every member and every value.
			err = add(base+`lower(substr(k, 33)) >= ? AND lower(substr(k, 33)) < ?`, prop+"/", prop+"0")
			if err == nil {
				err = add(base+`lower(substr(k, 33)) = ?`, prop)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return set, nil
}

// recordFields reads a record's merged fields.
func recordFields(ctx context.Context, tx *sql.Tx, rid string) (map[string]string, error) {
	return queryFields(ctx, tx, `SELECT k, v FROM kv WHERE k >= ? AND k < ?`, "file:"+rid+"/", "file:"+rid+"0")
}

// matchTokens: every token is a case-insensitive substring of the haystack.
func matchTokens(rid string, fields map[string]string, tokens []string) bool {
	if len(tokens) == 0 {
		return true
	}
	hay := strings.ToLower(haystack(rid, fields))
	for _, t := range tokens {
		if !strings.Contains(hay, t) {
			return false
		}
	}
	return true
}

func truthy(v string) bool { return v != "" && v != "false" && v != "0" }

// matchFilters: filters AND together, a filter's values OR. A value
// matches a truthy key-set member property/value (compared without case)
// or the flat property's value, split at commas: equal without case when
// exact, else containing it.
func matchFilters(fields map[string]string, filters []SearchFilter) bool {
	for _, f := range filters {
		if len(f.Values) == 0 || f.Property == "" {
			continue
		}
		if !slices.ContainsFunc(f.Values, func(v string) bool { return matchValue(fields, f, v) }) {
			return false
		}
	}
	return true
}

func matchValue(fields map[string]string, f SearchFilter, v string) bool {
	member := f.Property + "/" + v
	if fv, ok := fields[member]; ok && truthy(fv) {
		return true
	}
	for k, fv := range fields {
		if len(k) == len(member) && strings.EqualFold(k, member) && truthy(fv) {
			return true
		}
	}
	flat, ok := fields[f.Property]
	if !ok {
		for k, fv := range fields {
			if strings.EqualFold(k, f.Property) {
				flat, ok = fv, true
				break
			}
		}
	}
	if !ok {
		return false
	}
	lv := strings.ToLower(strings.TrimSpace(v))
	for part := range strings.SplitSeq(flat, ",") {
		p := strings.ToLower(strings.TrimSpace(part))
		if f.Exact && p == lv || !f.Exact && strings.Contains(p, lv) {
			return true
		}
	}
	return false
}
