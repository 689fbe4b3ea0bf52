package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Search returns a page of matching records in rid order and the number of hits.
//
// SQL narrows the candidates (the FTS trigram index for query tokens, the
// kv_field_v index for filters), then every candidate's merged record is
// checked in Go with the exact semantics, so the index only ever has to
// give a superset: tokens or values it cannot serve exactly (short or
// non-ASCII) just narrow less.
func (s *Store) Search(ctx context.Context, q SearchQuery) (_ []SearchHit, _ int, err error) {
	defer s.noteRead(&err)
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
		if set != nil {
			narrow(set)
		}
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

// ftsExpr builds an FTS5 query from what the trigram index can serve
// exactly: runs of three ASCII characters or more, the tokens cut at every
// other character. The tokenizer folds ASCII case, and U+212A (Kelvin) to
// k, as strings.ToLower does, but not U+0130 (İ), which ToLower makes 'i':
// a token is cut at its i's too, or a title holding İ would be missed.
func ftsExpr(tokens []string) string {
	var parts []string
	for _, t := range tokens {
		if strings.ContainsRune(t, 0) { // FTS5 reads a NUL as the end of the query
			continue
		}
		cut := func(r rune) bool { return r >= utf8.RuneSelf || r == 'i' }
		for _, p := range strings.FieldsFunc(t, cut) {
			if len(p) >= 3 {
				parts = append(parts, `"`+strings.ReplaceAll(p, `"`, `""`)+`"`)
			}
		}
	}
	return strings.Join(parts, " AND ")
}

// maxSpellings bounds the key spellings one filter value is looked up
// under; past it the filter does not narrow.
const maxSpellings = 64

// sqlLower is SQLite's lower(): it folds ASCII letters only.
func sqlLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// keySpellings returns every key, as SQLite's lower() leaves it, that
// strings.EqualFold may find equal to x (the exact check's key test): each
// character may be any of its case partners, which lower() folds only for
// ASCII (Ü and ü stay apart) and two of which, U+212A (K) and U+017F (ſ),
// are partners of ASCII letters. ok is false past maxSpellings.
func keySpellings(x string) (out []string, ok bool) {
	out = []string{""}
	var alts []string
	for _, r := range x { // an invalid byte is U+FFFD, as EqualFold reads it
		alts = append(alts[:0], sqlLower(string(r)))
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if a := sqlLower(string(f)); !slices.Contains(alts, a) {
				alts = append(alts, a)
			}
		}
		if len(out)*len(alts) > maxSpellings {
			return nil, false
		}
		next := make([]string, 0, len(out)*len(alts))
		for _, p := range out {
			for _, a := range alts {
				next = append(next, p+a)
			}
		}
		out = next
	}
	return out, true
}

// likeContains is a LIKE pattern (ESCAPE '\') that every value whose
// strings.ToLower contains lv (lower-cased) matches. LIKE ignores ASCII
// case only, so a character of lv that other characters lower to (any
// non-ASCII one; i from U+0130, k from U+212A) matches any one character:
// ToLower maps character to character, so the positions agree.
func likeContains(lv string) string {
	var sb strings.Builder
	sb.WriteByte('%')
	for _, r := range lv {
		switch {
		case r == '%' || r == '_' || r == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r >= utf8.RuneSelf || r == 'i' || r == 'k':
			sb.WriteByte('_')
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteByte('%')
	return sb.String()
}

// filterCandidates returns the records that may match one filter (nil:
// it cannot narrow): for each value, those with a key-set member
// property/value, or a flat property whose value contains it. Keys are
// looked up under each spelling the exact check may find equal, values
// with a pattern looser than its test, so the set is a superset.
func filterCandidates(ctx context.Context, tx *sql.Tx, f SearchFilter) (map[string]bool, error) {
	set := map[string]bool{}
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
	in := func(keys []string) (string, []any) {
		args := make([]any, len(keys))
		for i, k := range keys {
			args[i] = k
		}
		return `lower(substr(k, 33)) IN (?` + strings.Repeat(`, ?`, len(keys)-1) + `)`, args
	}
	const base = `SELECT k FROM kv WHERE k >= 'file:' AND k < 'file;' AND `
	props, ok := keySpellings(f.Property)
	if !ok {
		return nil, nil
	}
	flatKeys, flatArgs := in(props)
	for _, v := range f.Values {
		if members, ok := keySpellings(f.Property + "/" + v); ok {
			cond, args := in(members)
			if err := add(base+cond, args...); err != nil {
				return nil, err
			}
		} else {
			// Too many spellings of the member (a word of 7 non-ASCII
			// letters has 128): every member of the property, by a range
			// per spelling of the property, still a narrow superset
			// (review 8, R8-2).
			for _, p := range props {
				q := base + `lower(substr(k, 33)) >= ? AND lower(substr(k, 33)) < ?`
				if err := add(q, p+"/", p+"0"); err != nil {
					return nil, err
				}
			}
		}
		// The flat arm compares trimmed, lower-cased values. LIKE stops
		// at a NUL (a text value may hold one): such values all qualify.
		pat := likeContains(strings.ToLower(strings.TrimSpace(v)))
		q := base + flatKeys + ` AND (v LIKE ? ESCAPE '\' OR instr(v, char(0)) > 0)`
		if err := add(q, append(flatArgs, pat)...); err != nil {
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
