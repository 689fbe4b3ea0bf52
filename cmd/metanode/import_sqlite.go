package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	_ "modernc.org/sqlite" // the "sqlite" driver (pure Go), as the store uses

	"github.com/metanode/metanode/store"
)

// sqliteSource reads a v1.x kv table (the flat keys in one string→string
// table) or a v2 truth database (signed claims), opened read-only. Rows
// are read in primary-key order in pages; a part of the file SQLite cannot
// read (damaged, or cut short) is reported and read around: the rows
// after it are read backwards from the end until the damage.
type sqliteSource struct {
	db      *sql.DB
	path    string
	lay     string
	rep     *importReport
	m       mapper
	aliases *aliasIndex
	owned   map[string][]string // rid → the cids the kv table's cid: index names it by
	units   atomic.Int64        // source units in all, counted by the first pass
	damaged bool                // the file's damage is in the report
	tmp     string              // the directory of a salvaged copy (salvageIfCut)
}

func openSQLiteSource(ctx context.Context, path, force string, rep *importReport) (*sqliteSource, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("--from-sqlite: %w", err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("--from-sqlite %s: not a file", abs)
	}
	db, err := openReadOnly(abs)
	if err != nil {
		return nil, err
	}
	s := &sqliteSource{db: db, path: abs, rep: rep, m: mapper{rep: rep}, aliases: newAliasIndex()}
	if s.lay, err = s.detect(ctx, force); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.salvageIfCut(ctx); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// openReadOnly opens a database file that is never written. A file with
// no write-ahead log beside it (a clean stop) is opened immutable: SQLite
// then takes no lock and makes no -shm or -wal file next to it. A log
// with content holds committed rows: SQLite reads it, for which it needs
// the -shm file beside it (made when missing).
func openReadOnly(path string) (*sql.DB, error) {
	q := url.Values{}
	q.Set("mode", "ro")
	if fi, err := os.Stat(path + "-wal"); err != nil || fi.Size() == 0 {
		q.Set("immutable", "1")
	}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "query_only(1)")
	// SQLite refuses a file shorter than its header says (cut short) as
	// malformed unless the schema is "writable": then it reads what is
	// there. mode=ro and query_only keep the file unchanged.
	q.Add("_pragma", "writable_schema(1)")
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// salvageIfCut reads a file cut short from its pages (import_salvage.go)
// and imports the copy of the rows they still hold.
func (s *sqliteSource) salvageIfCut(ctx context.Context) error {
	h, err := readSQLiteHeader(s.path)
	if err != nil || !h.cutShort {
		return nil // the header was read once already; other damage is read around
	}
	if !h.utf8 {
		return fmt.Errorf("--from-sqlite %s: cut short, and not UTF-8: restore it from a backup", s.path)
	}
	copyPath, rows, err := salvage(ctx, s.path, s.lay, kvWithoutRowid(ctx, s.db), h)
	if err != nil {
		return err
	}
	db, err := openReadOnly(copyPath)
	if err != nil {
		os.RemoveAll(filepath.Dir(copyPath))
		return err
	}
	s.db.Close()
	s.db, s.tmp = db, filepath.Dir(copyPath)
	s.damage(fmt.Sprintf("%s: cut short: it holds %d of the %d pages its header counts; %d rows were read from the pages that remain, the rows of the lost pages are not imported",
		s.path, h.filePages, h.pages, rows))
	return nil
}

func (s *sqliteSource) name() string   { return s.path }
func (s *sqliteSource) layout() string { return s.lay }
func (s *sqliteSource) total() int64   { return s.units.Load() }
func (s *sqliteSource) close() error {
	err := s.db.Close()
	if s.tmp != "" {
		os.RemoveAll(s.tmp)
	}
	return err
}

func (s *sqliteSource) unit() string {
	if s.lay == layoutKV {
		return "keys"
	}
	return "claims"
}

// detect tells the layout from the tables and the schema version: a v2
// truth has claim and principal (meta schema-version "3"), a v1.x store a
// kv table (meta-core:schema-version "2" in it).
func (s *sqliteSource) detect(ctx context.Context, force string) (string, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT name FROM sqlite_master WHERE type = 'table'")
	if err != nil {
		return "", fmt.Errorf("--from-sqlite %s: %w: not a SQLite database, or damaged at its start", s.path, err)
	}
	tables := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return "", fmt.Errorf("--from-sqlite %s: %w", s.path, err)
		}
		tables[n] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("--from-sqlite %s: %w: not a SQLite database, or damaged at its start", s.path, err)
	}
	lay := force
	if lay == "" {
		switch {
		case tables["claim"] && tables["principal"]:
			lay = layoutClaims
		case tables["kv"]:
			lay = layoutKV
		default:
			return "", fmt.Errorf("--from-sqlite %s: neither a v1.x store (a kv table) nor a v2 truth (claim and principal tables)", s.path)
		}
	}
	if lay == layoutClaims && !(tables["claim"] && tables["principal"]) || lay == layoutKV && !tables["kv"] {
		return "", fmt.Errorf("--from-sqlite %s: no tables of the %s layout", s.path, lay)
	}
	return lay, s.checkVersion(ctx, lay, force != "")
}

// checkVersion refuses a schema version this import does not know, unless
// the layout was forced.
func (s *sqliteSource) checkVersion(ctx context.Context, lay string, forced bool) error {
	q, want := "SELECT v FROM kv WHERE k = 'meta-core:schema-version'", "2"
	if lay == layoutClaims {
		q, want = "SELECT value FROM meta WHERE name = 'schema-version'", "3"
	}
	var v string
	err := s.db.QueryRowContext(ctx, q).Scan(&v)
	switch {
	case forced, errors.Is(err, sql.ErrNoRows), err == nil && v == want:
		return nil
	case err != nil && lay == layoutClaims:
		return nil // a truth without meta: its claims are still claims
	case err != nil: // the page that holds it is damaged: read the rest
		s.damage(fmt.Sprintf("%s: the schema version could not be read (%v)", s.path, err))
		return nil
	}
	return fmt.Errorf("--from-sqlite %s: schema version %q, not the %s layout's %q: pass --layout %s to read it anyway", s.path, v, lay, want, lay)
}

func (s *sqliteSource) read(ctx context.Context, cursor string, batch int, emit func(*importBatch) error) error {
	if s.lay == layoutClaims {
		return s.readClaims(ctx, cursor, batch, emit)
	}
	return s.readKV(ctx, cursor, batch, emit)
}

// pageSpec is a paged, ordered read of one table.
type pageSpec struct {
	sel  string   // SELECT … FROM … WHERE <range>, the key columns first
	keys []string // the key columns, in order
	cols int      // columns selected
}

// sqlPage is the query of one page after the key after (nil: from the
// start), forward or, desc, backward down to before (nil: from the end).
func (p pageSpec) sqlPage(after, before []any, desc bool, limit int) (string, []any) {
	var b strings.Builder
	b.WriteString(p.sel)
	tuple := "(" + strings.Join(p.keys, ", ") + ")"
	marks := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(p.keys)), ", ") + ")"
	var args []any
	if after != nil {
		b.WriteString(" AND " + tuple + " > " + marks)
		args = append(args, after...)
	}
	if before != nil {
		b.WriteString(" AND " + tuple + " < " + marks)
		args = append(args, before...)
	}
	order := make([]string, len(p.keys))
	for i, k := range p.keys {
		order[i] = k
		if desc {
			order[i] += " DESC"
		}
	}
	b.WriteString(" ORDER BY " + strings.Join(order, ", ") + " LIMIT " + strconv.Itoa(limit))
	return b.String(), args
}

// pageRows reads one page: its rows, or the error that stopped it with
// the rows read before it.
func (s *sqliteSource) pageRows(ctx context.Context, p pageSpec, after, before []any, desc bool, limit int) ([][]any, error) {
	q, args := p.sqlPage(after, before, desc, limit)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		vals := make([]any, p.cols)
		ptrs := make([]any, p.cols)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return out, err
		}
		out = append(out, vals)
	}
	return out, rows.Err()
}

// scan reads every row of p after from (nil: the start) in pages and calls
// fn with each page and whether it was read forward. Where the file cannot
// be read, it reports the damage and reads the rest backwards from the end
// until it meets the damage again; the rows between are lost.
func (s *sqliteSource) scan(ctx context.Context, p pageSpec, from []any, page int, fn func(rows [][]any, forward bool) error) error {
	last := from
	for {
		rows, err := s.pageRows(ctx, p, last, nil, false, page)
		if len(rows) > 0 {
			if ferr := fn(rows, true); ferr != nil {
				return ferr
			}
			last = rows[len(rows)-1][:len(p.keys)]
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return s.scanBack(ctx, p, last, page, err, fn)
		}
		if len(rows) < page {
			return nil
		}
	}
}

// scanBack reads backwards from the end down to the key after (the last
// row read forward), after a forward read failed with cause.
func (s *sqliteSource) scanBack(ctx context.Context, p pageSpec, after []any, page int, cause error, fn func(rows [][]any, forward bool) error) error {
	var before []any
	var got int64
	for {
		rows, err := s.pageRows(ctx, p, after, before, true, page)
		if len(rows) > 0 {
			got += int64(len(rows))
			if ferr := fn(rows, false); ferr != nil {
				return ferr
			}
			before = rows[len(rows)-1][:len(p.keys)]
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil || len(rows) < page {
			s.damage(fmt.Sprintf("%s: rows after %s and before %s could not be read (%v); %d rows read after them",
				s.path, keyText(after, "the start"), keyText(before, "the end"), cause, got))
			return nil
		}
	}
}

// damage notes a range the file could not give: the file counts once,
// each pass that met the damage names its range.
func (s *sqliteSource) damage(msg string) {
	s.rep.mu.Lock()
	defer s.rep.mu.Unlock()
	if !s.damaged {
		s.damaged = true
		s.rep.BadInput.note(badDamaged, reasonWhy[badDamaged], msg)
		return
	}
	s.rep.BadInput.example(badDamaged, msg)
}

func keyText(k []any, none string) string {
	if k == nil {
		return none
	}
	parts := make([]string, len(k))
	for i, v := range k {
		parts[i] = fmt.Sprint(text(v))
	}
	return strings.Join(parts, " ")
}

// text is a column's value as text ("" for NULL).
func text(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// ---- v1.x: the kv table

// kvRanges of the v1.x kv table.
const (
	kvCIDs  = "k >= 'cid:' AND k < 'cid;'"
	kvFiles = "k >= 'file:' AND k < 'file;'"
)

// readKV imports a v1.x kv table: the keys outside records (reported), the
// cid: index and every record's cids/<cid> members (the alias index), then
// the records, whose keys are adjacent in key order. The cursor is the rid
// of the last record stored.
func (s *sqliteSource) readKV(ctx context.Context, cursor string, batch int, emit func(*importBatch) error) error {
	if err := s.kvOthers(ctx); err != nil {
		return err
	}
	if err := s.kvAliases(ctx); err != nil {
		return err
	}
	var from []any
	if cursor != "" {
		from = []any{"file:" + cursor + "0"} // past every file:<rid>/… key
	}
	var forward bool
	g := &kvGroup{s: s}
	b := &importBatch{cursor: cursor}
	flush := func(force bool) error {
		if b.size() == 0 || (!force && b.size() < batch) {
			return nil
		}
		out := b
		b = &importBatch{cursor: out.cursor}
		return emit(out)
	}
	p := pageSpec{sel: "SELECT k, v FROM kv WHERE " + kvFiles, keys: []string{"k"}, cols: 2}
	err := s.scan(ctx, p, from, 2048, func(rows [][]any, fwd bool) error {
		if fwd != forward && g.rid != "" {
			g.flush(b, forward) // the backward read continues elsewhere
		}
		forward = fwd
		for _, r := range rows {
			k := text(r[0])
			b.units++
			rid, field, ok := flatKey(k)
			if !ok {
				s.rep.bad(badNoLayout, printable(k))
				continue
			}
			if rid != g.rid {
				g.flush(b, forward)
				if err := flush(false); err != nil {
					return err
				}
				g.rid = rid
			}
			g.fields = append(g.fields, [2]string{field, text(r[1])})
		}
		return nil
	})
	if err != nil {
		return err
	}
	g.flush(b, forward)
	return flush(true)
}

// kvGroup gathers the keys of one record of the kv table.
type kvGroup struct {
	s      *sqliteSource
	rid    string
	fields [][2]string
}

// flush makes the claims of the gathered record into b.
func (g *kvGroup) flush(b *importBatch, forward bool) {
	if g.rid == "" {
		return
	}
	s := g.s
	s.rep.Records++
	var cids []string
	for _, f := range g.fields {
		cids = append(cids, s.kvCIDs(g.rid, f[0], f[1], true)...)
	}
	if c, err := legacyCID("", g.rid); err == nil {
		cids = append(cids, c)
	}
	cids = append(cids, s.owned[g.rid]...)
	cids = s.aliases.keep(g.rid, cids, s.rep)
	rec := &legacyRec{name: g.rid, cid: primary(cids)}
	if store.IsRID(g.rid) {
		rec.rid = g.rid
	}
	switch {
	case rec.cid == "":
		s.rep.notCarried(ncNoContentID, fmt.Sprintf("%s (%d keys)", printable(g.rid), len(g.fields)))
	default:
		if rec.rid != "" {
			s.rep.RIDsNamed++
		}
		for _, c := range cids {
			if c != rec.cid {
				rec.link(b, c)
				s.rep.Links++
			}
		}
		for _, f := range g.fields {
			s.m.field(rec, f[0], f[1], b)
		}
	}
	if forward {
		b.cursor = g.rid
	}
	g.rid, g.fields = "", g.fields[:0]
}

// kvCIDs returns the content ids a record's alias field names, noting
// those that are not content ids (note false: the first pass, which only
// learns).
func (s *sqliteSource) kvCIDs(rid, field, value string, note bool) []string {
	if !aliasKey(field) {
		return nil
	}
	cids, bad := fieldCIDs(field, value)
	for _, err := range bad {
		if note {
			s.rep.notCarried(ncBadAlias, fmt.Sprintf("%s %s: %v", printable(rid), printable(field), err))
		}
	}
	return cids
}

// kvOthers reads the keys outside the cid: index and the records, and
// notes what each is: derived rows, events, box-local duplicate paths,
// user-data cells, services' scratch keys.
func (s *sqliteSource) kvOthers(ctx context.Context) error {
	p := pageSpec{sel: "SELECT k FROM kv WHERE NOT (" + kvCIDs + ") AND NOT (" + kvFiles + ")", keys: []string{"k"}, cols: 1}
	return s.scan(ctx, p, nil, 4096, func(rows [][]any, _ bool) error {
		for _, r := range rows {
			s.kvOther(text(r[0]))
		}
		return nil
	})
}

func (s *sqliteSource) kvOther(k string) {
	switch {
	case k == redisSchemaKey:
		s.rep.skip(skipSchema, k)
	case strings.HasPrefix(k, "ev:"), strings.HasPrefix(k, "evhwm:"):
		s.rep.skip(skipEvents, printable(k))
	case strings.HasPrefix(k, "idx:"), strings.HasPrefix(k, "meta:"):
		s.rep.skip(skipDerived, printable(k))
	case strings.HasPrefix(k, "dup:"):
		s.rep.notCarried(ncBoxLocal, printable(k))
	case strings.HasPrefix(k, "udl:"):
		s.rep.notCarried(ncUDL, printable(k))
	case strings.HasPrefix(k, "file:"), strings.HasPrefix(k, "cid:"):
		s.rep.bad(badNoLayout, printable(k)) // outside the ranges only by a byte past ':'
	default:
		s.rep.skip(skipScratch, printable(k))
	}
}

// kvAliases is the kv table's first pass: the cid: index (owners) and
// every record's cids members and lists (listers), and the count of record
// keys for progress.
func (s *sqliteSource) kvAliases(ctx context.Context) error {
	s.owned = map[string][]string{}
	p := pageSpec{sel: "SELECT k, v FROM kv WHERE " + kvCIDs, keys: []string{"k"}, cols: 2}
	err := s.scan(ctx, p, nil, 4096, func(rows [][]any, _ bool) error {
		for _, r := range rows {
			k, rid := text(r[0]), text(r[1])
			if rid == "" || strings.Contains(rid, "/") {
				s.rep.bad(badNoLayout, fmt.Sprintf("%s → %q", printable(k), rid))
				continue
			}
			c, err := legacyCID("", strings.TrimPrefix(k, "cid:"))
			if err != nil {
				s.rep.notCarried(ncBadAlias, fmt.Sprintf("%s: %v", printable(k), err))
				continue
			}
			s.aliases.own(c, rid)
			s.owned[rid] = append(s.owned[rid], c)
		}
		return nil
	})
	if err != nil {
		return err
	}
	p = pageSpec{sel: "SELECT k, v FROM kv WHERE " + kvFiles, keys: []string{"k"}, cols: 2}
	return s.scan(ctx, p, nil, 4096, func(rows [][]any, _ bool) error {
		for _, r := range rows {
			s.units.Add(1)
			rid, field, ok := flatKey(text(r[0]))
			if !ok {
				continue
			}
			for _, c := range s.kvCIDs(rid, field, text(r[1]), false) {
				s.aliases.list(c, rid)
			}
		}
		return nil
	})
}

// ---- v2: a truth database of signed claims

// readClaims imports a v2 truth's claims as they are, with the rid of each
// claim's cid (cid_group). The cursor is the last (cid, key, pid) stored.
func (s *sqliteSource) readClaims(ctx context.Context, cursor string, batch int, emit func(*importBatch) error) error {
	var n int64
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM claim").Scan(&n); err == nil {
		s.units.Store(n)
	}
	_ = s.db.QueryRowContext(ctx, "SELECT count(DISTINCT rid) FROM cid_group").Scan(&s.rep.Records)
	var from []any
	if cursor != "" {
		var pid float64
		ok := json.Unmarshal([]byte(cursor), &from) == nil && len(from) == 3
		if ok {
			pid, ok = from[2].(float64)
		}
		if !ok {
			return fmt.Errorf("import state: cursor %q of the claims layout: want [cid, key, pid]", cursor)
		}
		from[2] = int64(pid)
	}
	var one int
	err := s.db.QueryRowContext(ctx, "SELECT 1 FROM cid_group LIMIT 1").Scan(&one)
	hasGroups := err == nil || errors.Is(err, sql.ErrNoRows)
	sel := "SELECT c.cid, c.key, c.pid, p.uid, c.value, c.ts, c.sig, NULL FROM claim c LEFT JOIN principal p ON p.pid = c.pid WHERE 1"
	if hasGroups {
		sel = "SELECT c.cid, c.key, c.pid, p.uid, c.value, c.ts, c.sig, g.rid FROM claim c LEFT JOIN principal p ON p.pid = c.pid LEFT JOIN cid_group g ON g.cid = c.cid WHERE 1"
	}
	p := pageSpec{sel: sel, keys: []string{"c.cid", "c.key", "c.pid"}, cols: 8}
	b := &importBatch{cursor: cursor}
	return s.scan(ctx, p, from, batch, func(rows [][]any, fwd bool) error {
		for _, r := range rows {
			b.units++
			s.claimRow(r, b)
		}
		if fwd {
			last := rows[len(rows)-1]
			c, _ := json.Marshal([]any{text(last[0]), text(last[1]), last[2]})
			b.cursor = string(c)
		}
		out := b
		b = &importBatch{cursor: out.cursor}
		return emit(out)
	})
}

// claimRow turns one row of a v2 claim table into a claim to store as it
// is (the node verifies it), with its record's rid.
func (s *sqliteSource) claimRow(r []any, b *importBatch) {
	where := text(r[0]) + " " + text(r[1])
	uid, _ := r[3].(string)
	ts, tsOK := r[5].(int64)
	sigBytes, _ := r[6].([]byte)
	if uid == "" || !tsOK || ts < 0 {
		s.rep.bad(badLayoutRow, printable(where)+": no signer or timestamp")
		return
	}
	sig, err := store.ParseSig(sigBytes)
	if err != nil {
		s.rep.bad(badLayoutRow, fmt.Sprintf("%s: signature: %v", printable(where), err))
		return
	}
	c := store.Claim{UID: uid, CID: text(r[0]), Key: text(r[1]), TS: uint64(ts), Sig: sig}
	switch v := r[4].(type) {
	case nil:
		c.Kind = store.KindRetraction
	case string:
		c.Kind, c.Value = store.KindText, []byte(v)
	case []byte:
		c.Kind, c.Value = store.KindCipher, v
	default:
		s.rep.bad(badLayoutRow, fmt.Sprintf("%s: a value of type %T", printable(where), v))
		return
	}
	b.claims = append(b.claims, c)
	s.rep.Claims++
	s.rep.signer(uid)
	if rid := text(r[7]); store.IsRID(rid) {
		if b.rids == nil {
			b.rids = map[string]string{}
		}
		b.rids[c.CID] = rid
	}
}
