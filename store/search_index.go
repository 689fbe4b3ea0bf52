package store

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// How a search reads (docs/store.md "Search"): tokens from the search
// table, one short row per record (rid, haystack), narrowed in SQL by the
// trigram index and LIKE; filters from kv_field_v, the merged fields by
// name. Every row read is checked in Go with the exact matchers, so the
// SQL only has to give a superset, and what it reads is bounded by the
// store's size whatever the query holds.

// Bounds of the SQL a search builds.
const (
	// ftsParts and ftsPartLen bound the trigram query: the longest parts
	// of the tokens, each cut to its first ftsPartLen characters (a
	// substring of the haystack holds its prefixes too). The index's
	// memory grows with the trigrams of the query.
	ftsParts   = 4
	ftsPartLen = 12
	// likeRuns bounds the literal runs of a short token's LIKE pattern.
	likeRuns = 4
	// maxSpellings bounds the key spellings one property or member is
	// looked up under; past it, its longest prefix with fewer is scanned.
	maxSpellings = 64
	// maxFilterKeys and maxFilterScans bound the lookups of one filter
	// (keys looked up, prefixes scanned); past them, the filter scans
	// every member of its property instead.
	maxFilterKeys  = 1024
	maxFilterScans = 64
	// inChunk is the number of keys per IN list.
	inChunk = 256
	// checkEvery is how many rows a loop reads between context checks.
	checkEvery = 1024
)

// searchCost counts what a search read: its measure for the cost tests.
type searchCost struct {
	rows     int // rows read from SQLite into Go
	queries  int // statements run
	trigrams int // trigrams in the full-text query
}

// sortRIDs sorts rids and drops repeats.
func sortRIDs(rids []string) []string {
	slices.Sort(rids)
	return slices.Compact(rids)
}

// intersect returns the ids in both sorted lists.
func intersect(a, b []string) []string {
	out := make([]string, 0, min(len(a), len(b)))
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch c := strings.Compare(a[i], b[j]); {
		case c < 0:
			i++
		case c > 0:
			j++
		default:
			out = append(out, a[i])
			i, j = i+1, j+1
		}
	}
	return out
}

// fieldsSQL reads a record's merged rows (k, v). The primary key is named:
// left to choose, SQLite compiles the statement again at every run, to
// see whether the bound range implies kv_field_v's WHERE.
const fieldsSQL = `SELECT k, v FROM kv INDEXED BY sqlite_autoindex_kv_1 WHERE k >= ? AND k < ?`

// searchTx is one search's read transaction and what it has read.
//
// It is a transaction opened on a connection by hand, not a sql.Tx:
// database/sql starts a goroutine to watch the context of every statement
// run in a sql.Tx (the transaction's own, if not the statement's), which
// for a page is thousands, and they flood the run queues the record reads
// wait in. Here only the scans, which take the search's context, have one.
type searchTx struct {
	conn     *sql.Conn
	fieldsSt *sql.Stmt // fieldsSQL
	cost     searchCost
	onRow    func() // test seam (searchPool.onRow)
}

// beginSearch takes a connection of db and begins a read transaction on
// it; end ends both.
func beginSearch(ctx context.Context, db *sql.DB) (*searchTx, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	t := &searchTx{conn: conn}
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), "BEGIN"); err != nil {
		conn.Close()
		return nil, err
	}
	if t.fieldsSt, err = conn.PrepareContext(context.WithoutCancel(ctx), fieldsSQL); err != nil {
		t.end()
		return nil, err
	}
	return t, nil
}

// end rolls the transaction back and gives the connection back; a
// connection whose rollback failed (its state unknown) is closed instead.
func (t *searchTx) end() {
	if t.fieldsSt != nil {
		t.fieldsSt.Close()
	}
	if _, err := t.conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		_ = t.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	t.conn.Close()
}

// each runs q and hands fn each row, checking ctx every checkEvery rows
// (the driver also interrupts SQLite when ctx ends).
func (t *searchTx) each(ctx context.Context, fn func(a, b string), q string, args ...any) error {
	cost := &t.cost
	cost.queries++
	rows, err := t.conn.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var a, b string
		if err := rows.Scan(&a, &b); err != nil {
			return err
		}
		if t.onRow != nil {
			t.onRow()
		}
		if cost.rows++; cost.rows%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		fn(a, b)
	}
	return rows.Err()
}

// tokenSet returns the records whose haystack holds every token, sorted.
func (t *searchTx) tokenSet(ctx context.Context, tokens []string) ([]string, error) {
	q, args, trigrams := tokenSQL(tokens)
	t.cost.trigrams += trigrams
	rids := []string{}
	var l lowerer
	err := t.each(ctx, func(rid, hay string) {
		if l.hayMatches(hay, tokens) {
			rids = append(rids, rid)
		}
	}, q, args...)
	return sortRIDs(rids), err
}

// tokenSQL builds the statement that narrows the search rows: a trigram
// MATCH of the longest runs of three ASCII characters or more, and a LIKE
// for each token with no such run.
func tokenSQL(tokens []string) (q string, args []any, trigrams int) {
	var conds []string
	if expr, n := ftsExpr(tokens); expr != "" {
		conds = append(conds, `hay MATCH ?`)
		args = append(args, expr)
		trigrams = n
	}
	for _, t := range tokens {
		if len(ftsRuns(t)) > 0 {
			continue
		}
		if pat, ok := tokenLike(t); ok {
			// LIKE stops at a NUL (a value may hold one): such rows qualify.
			conds = append(conds, `(hay LIKE ? ESCAPE '\' OR instr(hay, char(0)) > 0)`)
			args = append(args, pat)
		}
	}
	q = `SELECT rid, hay FROM fts`
	if len(conds) > 0 {
		q += ` WHERE ` + strings.Join(conds, ` AND `)
	}
	return q, args, trigrams
}

// ftsRuns are the runs of a token the trigram index serves exactly: ASCII
// characters, cut at every other character and at i. The tokenizer folds
// ASCII case, and U+212A (Kelvin) to k, as strings.ToLower does, but not
// U+0130 (İ), which ToLower makes 'i': a token is cut at its i's too, or a
// title holding İ would be missed. A NUL ends an FTS5 query: a token
// holding one gives none.
func ftsRuns(t string) []string {
	if strings.ContainsRune(t, 0) {
		return nil
	}
	cut := func(r rune) bool { return r >= utf8.RuneSelf || r == 'i' }
	var out []string
	for _, p := range strings.FieldsFunc(t, cut) {
		if len(p) >= 3 {
			out = append(out, p)
		}
	}
	return out
}

// ftsExpr is the FTS5 query for the tokens: the ftsParts longest runs,
// each cut to ftsPartLen characters, ANDed; and its number of trigrams.
func ftsExpr(tokens []string) (string, int) {
	var parts []string
	for _, t := range tokens {
		for _, p := range ftsRuns(t) {
			parts = append(parts, p[:min(len(p), ftsPartLen)])
		}
	}
	slices.SortFunc(parts, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
	parts = slices.Compact(parts)
	parts = parts[:min(len(parts), ftsParts)]
	n := 0
	for i, p := range parts {
		n += len(p) - 2
		parts[i] = `"` + strings.ReplaceAll(p, `"`, `""`) + `"`
	}
	return strings.Join(parts, " AND "), n
}

// tokenLike is a LIKE pattern (ESCAPE '\') that every haystack whose
// strings.ToLower holds t matches, from t's first likeRuns literal runs; ok
// is false when t has no literal character. ToLower maps only ASCII
// letters, U+0130 (to i) and U+212A (to k) to ASCII, and never changes an
// ASCII character's neighbours, so t's runs of ASCII characters other than
// i and k appear in the haystack as they are, up to ASCII case (which LIKE
// ignores); whatever lies between them is matched by %, however SQLite
// reads the bytes there.
func tokenLike(t string) (string, bool) {
	var sb strings.Builder
	sb.WriteByte('%')
	runs, open := 0, false
	for _, r := range t {
		if r >= utf8.RuneSelf || r == 'i' || r == 'k' {
			if open {
				sb.WriteByte('%')
				open = false
			}
			continue
		}
		if !open {
			if runs == likeRuns {
				break
			}
			runs++
			open = true
		}
		if r == '%' || r == '_' || r == '\\' {
			sb.WriteByte('\\')
		}
		sb.WriteRune(r)
	}
	if open {
		sb.WriteByte('%')
	}
	return sb.String(), runs > 0
}

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

// runeAlts are the spellings of r as SQLite's lower() leaves them: r and
// its case partners, which lower() folds only for ASCII (Ü and ü stay
// apart) and two of which, U+212A (K) and U+017F (ſ), are partners of
// ASCII letters. An invalid byte is U+FFFD, as EqualFold reads it.
func runeAlts(r rune) []string {
	alts := []string{sqlLower(string(r))}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if a := sqlLower(string(f)); !slices.Contains(alts, a) {
			alts = append(alts, a)
		}
	}
	return alts
}

// keySpellings returns every key, as SQLite's lower() leaves it, that
// strings.EqualFold (the exact check's key test) may find equal to x: each
// rune may be any of its case partners (runeAlts). ok is false past
// maxSpellings.
func keySpellings(x string) (out []string, ok bool) {
	out = []string{""}
	for _, r := range x {
		alts := runeAlts(r)
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

// keyRanges are the kv_field_v lookups that find every field equal to x
// without case: its spellings when there are at most maxSpellings, else
// every field starting with a spelling of x's longest prefix that has so
// few (a prefix of a key is a prefix of its spellings).
func keyRanges(x string) (eq, prefix []string) {
	if sp, ok := keySpellings(x); ok {
		return sp, nil
	}
	n, end := 1, 0
	for end < len(x) {
		r, w := utf8.DecodeRuneInString(x[end:])
		if n *= len(runeAlts(r)); n > maxSpellings {
			break
		}
		end += w
	}
	sp, _ := keySpellings(x[:end])
	return nil, sp
}

// fieldLookups are the kv_field_v lookups of one filter: lowered field
// names to find exactly and prefixes to scan, without repeats.
type fieldLookups struct {
	eq, prefix map[string]bool
}

func (l *fieldLookups) add(x string) {
	eq, prefix := keyRanges(x)
	for _, k := range eq {
		l.eq[k] = true
	}
	for _, p := range prefix {
		l.prefix[p] = true
	}
}

// prune drops the lookups that a shorter prefix covers.
func (l *fieldLookups) prune() {
	covered := func(k string, self bool) bool {
		for p := range l.prefix {
			if strings.HasPrefix(k, p) && (!self || len(p) < len(k)) {
				return true
			}
		}
		return false
	}
	for k := range l.eq {
		if covered(k, false) {
			delete(l.eq, k)
		}
	}
	for p := range l.prefix {
		if covered(p, true) {
			delete(l.prefix, p)
		}
	}
}

// prefixEnd is the smallest string above every string that starts with p
// ("" when there is none).
func prefixEnd(p string) string {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}

// filterPlan is one filter, made ready for the rows of kv_field_v.
type filterPlan struct {
	prop    string
	exact   bool
	needles []string         // the values as the flat arm compares them
	members map[string][]int // foldKey(property/value) → the byte lengths of such members
	look    fieldLookups
}

func planFilter(f SearchFilter) *filterPlan {
	p := &filterPlan{prop: f.Property, exact: f.Exact, members: map[string][]int{},
		look: fieldLookups{eq: map[string]bool{}, prefix: map[string]bool{}}}
	p.look.add(f.Property)
	for _, v := range f.Values {
		m := f.Property + "/" + v
		fk := foldKey(m)
		if !slices.Contains(p.members[fk], len(m)) {
			p.members[fk] = append(p.members[fk], len(m))
			p.look.add(m)
		}
		if n := flatNeedle(v); !slices.Contains(p.needles, n) {
			p.needles = append(p.needles, n)
		}
	}
	if len(p.look.eq) > maxFilterKeys || len(p.look.prefix) > maxFilterScans {
		// Too many lookups: the property's flat fields and all its
		// members, the fields under a spelling of "property/".
		p.look = fieldLookups{eq: map[string]bool{}, prefix: map[string]bool{}}
		p.look.add(f.Property)
		eq, prefix := keyRanges(f.Property + "/")
		for _, k := range slices.Concat(eq, prefix) {
			p.look.prefix[k] = true
		}
	}
	p.look.prune()
	return p
}

// filterRow is a kv_field_v row that decides whether its record matches
// a filter: a flat field (match: its value matches) or a matching member.
type filterRow struct {
	rid, field string
	flat       bool
	match      bool
}

// filterMatcher applies one filter's exact check to kv_field_v rows.
type filterMatcher struct {
	p    *filterPlan
	l    lowerer
	rows []filterRow
}

func (m *filterMatcher) row(k, v string) {
	rid, field, ok := splitFieldKey(k)
	if !ok {
		return
	}
	if strings.EqualFold(field, m.p.prop) {
		m.rows = append(m.rows, filterRow{rid: rid, field: field, flat: true, match: m.l.flatMatches(v, m.p.needles, m.p.exact)})
		return
	}
	if truthy(v) && slices.Contains(m.p.members[foldKey(field)], len(field)) {
		m.rows = append(m.rows, filterRow{rid: rid, field: field, match: true})
	}
}

// result is the records that match, sorted: those with a matching member,
// or whose flat field (betterFlat's choice) matches.
func (m *filterMatcher) result() []string {
	slices.SortFunc(m.rows, func(a, b filterRow) int { return strings.Compare(a.rid, b.rid) })
	out := []string{}
	for i := 0; i < len(m.rows); {
		j, hit, flat := i, false, -1
		for ; j < len(m.rows) && m.rows[j].rid == m.rows[i].rid; j++ {
			r := &m.rows[j]
			switch {
			case !r.flat:
				hit = true
			case flat < 0 || betterFlat(r.field, m.rows[flat].field, m.p.prop):
				flat = j
			}
		}
		if hit || flat >= 0 && m.rows[flat].match {
			out = append(out, m.rows[i].rid)
		}
		i = j
	}
	return out
}

// filterSet returns the records that match f, sorted, from the rows of
// kv_field_v its lookups find.
func (t *searchTx) filterSet(ctx context.Context, f SearchFilter) ([]string, error) {
	p := planFilter(f)
	m := &filterMatcher{p: p}
	const base = `SELECT k, v FROM kv WHERE k >= 'file:' AND k < 'file;' AND `
	eq := sortedKeys(p.look.eq)
	for part := range slices.Chunk(eq, inChunk) {
		args := make([]any, len(part))
		for i, k := range part {
			args[i] = k
		}
		q := base + `lower(substr(k, 33)) IN (?` + strings.Repeat(`, ?`, len(part)-1) + `)`
		if err := t.each(ctx, m.row, q, args...); err != nil {
			return nil, err
		}
	}
	for _, pre := range sortedKeys(p.look.prefix) {
		q, args := base+`lower(substr(k, 33)) >= ?`, []any{pre}
		if end := prefixEnd(pre); end != "" {
			q, args = q+` AND lower(substr(k, 33)) < ?`, append(args, end)
		}
		if err := t.each(ctx, m.row, q, args...); err != nil {
			return nil, err
		}
	}
	return m.result(), nil
}

// fields reads a record's merged fields in key order into buf. It runs
// without cancellation: it is short, and the driver would start a
// goroutine per statement to watch ctx.
func (t *searchTx) fields(ctx context.Context, rid string, buf []Field) ([]Field, error) {
	t.cost.queries++
	rows, err := t.fieldsSt.QueryContext(context.WithoutCancel(ctx), "file:"+rid+"/", "file:"+rid+"0")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	buf = buf[:0]
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		t.cost.rows++
		if _, f, ok := splitFieldKey(k); ok {
			buf = append(buf, Field{Key: f, Value: v})
		}
	}
	return buf, rows.Err()
}

// record reads a record's merged fields.
func (t *searchTx) record(ctx context.Context, rid string) (map[string]string, error) {
	fields, err := t.fields(ctx, rid, nil)
	out := make(map[string]string, len(fields))
	for _, f := range fields {
		out[f.Key] = f.Value
	}
	return out, err
}

// filterEach keeps the records of rids whose fields match every filter,
// reading each record (when they are few, cheaper than the filters'
// lookups).
func (t *searchTx) filterEach(ctx context.Context, rids []string, filters []SearchFilter) ([]string, error) {
	out := []string{}
	for _, rid := range rids {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fields, err := t.record(ctx, rid)
		if err != nil {
			return nil, err
		}
		if matchFilters(fields, filters) {
			out = append(out, rid)
		}
	}
	return out, nil
}

// rootsPage is a page of every record, and their number.
func (t *searchTx) rootsPage(ctx context.Context, offset, limit int) ([]string, int, error) {
	var total int
	t.cost.queries++
	err := t.conn.QueryRowContext(ctx, `SELECT count(*) FROM kv WHERE k >= 'idx:roots/' AND k < 'idx:roots0'`).Scan(&total)
	if err != nil {
		return nil, 0, err
	}
	var page []string
	err = t.each(ctx, func(rid, _ string) { page = append(page, rid) },
		`SELECT substr(k, 11), '' FROM kv WHERE k >= 'idx:roots/' AND k < 'idx:roots0' ORDER BY k LIMIT ? OFFSET ?`, limit, offset)
	return page, total, err
}

// eachHit hands fn each record of the page with its fields.
func (t *searchTx) eachHit(ctx context.Context, page []string, fn func(string, []Field) error) error {
	var buf []Field
	for _, rid := range page {
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		if buf, err = t.fields(ctx, rid, buf); err != nil {
			return err
		}
		if len(buf) == 0 {
			continue
		}
		if err := fn(rid, buf); err != nil {
			return err
		}
	}
	return nil
}
