package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// readStmts are the read pool's prepared statements for the hot paths.
type readStmts struct {
	fieldsByRID, fieldsByCID, fieldByRID, fieldByCID, ridByCID, root, paths, votesOf *sql.Stmt
}

func (s *Store) prepareReads(ctx context.Context) error {
	list := []struct {
		dst **sql.Stmt
		db  *sql.DB
		q   string
	}{
		{&s.rd.fieldsByRID, s.cacheR, `SELECT k, v FROM kv WHERE k >= ? AND k < ?`},
		{&s.rd.fieldsByCID, s.cacheR, `SELECT k, v FROM kv
			WHERE k >= (SELECT 'file:' || v || '/' FROM kv WHERE k = ?1) AND k < (SELECT 'file:' || v || '0' FROM kv WHERE k = ?1)`},
		{&s.rd.fieldByRID, s.cacheR, `SELECT v FROM kv WHERE k = ?`},
		{&s.rd.fieldByCID, s.cacheR, `SELECT v FROM kv WHERE k = 'file:' || (SELECT v FROM kv WHERE k = ?) || '/' || ?`},
		{&s.rd.ridByCID, s.cacheR, `SELECT v FROM kv WHERE k = ?`},
		{&s.rd.root, s.cacheR, `SELECT 1 FROM kv WHERE k = ?`},
		{&s.rd.paths, s.cacheR, `SELECT path FROM local_file WHERE midhash = ? ORDER BY path`},
		{&s.rd.votesOf, s.truthR, `SELECT key, value, ts, id FROM claim WHERE cid = ? AND pid = ?`},
	}
	for _, p := range list {
		st, err := p.db.PrepareContext(ctx, p.q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.q, err)
		}
		*p.dst = st
	}
	return nil
}

// quick drops cancellation for point reads: the driver would otherwise
// start a watcher goroutine per statement, which costs more than the read.
func quick(ctx context.Context) (context.Context, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return context.WithoutCancel(ctx), nil
}

// Record returns the merged view of the record that h names (a rid or any
// cid of the group). as, when set, overlays that signer's own live text
// votes. ErrNotFound when h is unknown or the record has no fields.
func (s *Store) Record(ctx context.Context, h, as string) (_ Record, err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return Record{}, err
	}
	rec, err := s.record(ctx, h, as)
	if s.cacheLost(ctx, h, rec.RID, err, true) {
		rec, err = s.record(ctx, h, as)
	}
	return rec, err
}

func (s *Store) record(ctx context.Context, h, as string) (Record, error) {
	qctx, err := quick(ctx)
	if err != nil {
		return Record{}, err
	}
	var rows *sql.Rows
	if IsRID(h) {
		rows, err = s.rd.fieldsByRID.QueryContext(qctx, "file:"+h+"/", "file:"+h+"0")
	} else {
		rows, err = s.rd.fieldsByCID.QueryContext(qctx, "cid:"+h)
	}
	if err != nil {
		return Record{}, fmt.Errorf("record %s: %w", h, err)
	}
	rec := Record{Fields: map[string]string{}}
	want := h // the rows' rid; a damaged key can bring another's (cacherepair.go)
	if !IsRID(h) {
		want, _ = s.groups.ridOf(h)
	}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			return Record{}, fmt.Errorf("record %s: %w", h, err)
		}
		rid, field, ok := splitFieldKey(k)
		if !ok || (want != "" && rid != want) {
			continue
		}
		rec.RID = rid
		rec.Fields[field] = v
		if c, isLink := cutLink(field); isLink {
			rec.CIDs = append(rec.CIDs, c)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Record{}, fmt.Errorf("record %s: %w", h, err)
	}
	if len(rec.Fields) == 0 {
		return Record{}, fmt.Errorf("record %s: %w", h, ErrNotFound)
	}
	slices.Sort(rec.CIDs)
	rec.CanonicalCID = CanonicalCID(rec.CIDs)
	if _, ok := rec.Fields["filePath"]; ok {
		if rec.Paths, err = s.paths(qctx, rec.CIDs); err != nil {
			return Record{}, fmt.Errorf("record %s: %w", h, err)
		}
	}
	if as != "" {
		if err := s.overlay(qctx, &rec, as); err != nil {
			return Record{}, fmt.Errorf("record %s: %w", h, err)
		}
	}
	return rec, nil
}

// paths lists every local path holding one of cids, sorted.
func (s *Store) paths(ctx context.Context, cids []string) ([]string, error) {
	var out []string
	for _, c := range cids {
		rows, err := s.rd.paths.QueryContext(ctx, c)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var p string
			if err := rows.Scan(&p); err != nil {
				rows.Close()
				return nil, err
			}
			out = append(out, p)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return out, nil
}

// overlay puts the signer's own live text votes over the merged view
// (never written to the cache). Link claims are not overlaid: membership
// comes from the group.
func (s *Store) overlay(ctx context.Context, rec *Record, as string) error {
	best := map[string]row{}
	if err := s.overlayRows(ctx, rec.CIDs, as, best); err != nil {
		return err
	}
	for key, r := range best {
		if r.kind == KindText {
			rec.Fields[key] = r.val
		}
	}
	return nil
}

// Resolve returns the rid of h (a rid or a cid).
func (s *Store) Resolve(ctx context.Context, h string) (_ string, err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return "", err
	}
	rid, err := s.resolve(ctx, h)
	if s.cacheLost(ctx, h, rid, err, false) {
		rid, err = s.resolve(ctx, h)
	}
	return rid, err
}

func (s *Store) resolve(ctx context.Context, h string) (string, error) {
	qctx, err := quick(ctx)
	if err != nil {
		return "", err
	}
	if IsRID(h) {
		var one int
		err := s.rd.root.QueryRowContext(qctx, "idx:roots/"+h).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return "", fmt.Errorf("resolve %s: %w", h, ErrNotFound)
		}
		if err != nil {
			return "", fmt.Errorf("resolve %s: %w", h, err)
		}
		return h, nil
	}
	var rid string
	err = s.rd.ridByCID.QueryRowContext(qctx, "cid:"+h).Scan(&rid)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("resolve %s: %w", h, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", h, err)
	}
	return rid, nil
}

// Field returns one merged value of the record h names.
func (s *Store) Field(ctx context.Context, h, key string) (_ string, err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return "", err
	}
	v, err := s.field(ctx, h, key)
	if s.cacheLost(ctx, h, "", err, false) {
		v, err = s.field(ctx, h, key)
	}
	return v, err
}

func (s *Store) field(ctx context.Context, h, key string) (string, error) {
	qctx, err := quick(ctx)
	if err != nil {
		return "", err
	}
	var v string
	if IsRID(h) {
		err = s.rd.fieldByRID.QueryRowContext(qctx, fieldKey(h, key)).Scan(&v)
	} else {
		err = s.rd.fieldByCID.QueryRowContext(qctx, "cid:"+h, key).Scan(&v)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("field %s of %s: %w", key, h, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("field %s of %s: %w", key, h, err)
	}
	return v, nil
}

// Claims returns the live claims of the record h names: every text and
// ciphertext claim of every signer on the group's cids, no tombstones. A
// cid that belongs to no record (a node's peer id, where vouches live) is
// answered with its own claims and an empty rid.
func (s *Store) Claims(ctx context.Context, h string, f ClaimFilter) (_ GroupClaims, err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return GroupClaims{}, err
	}
	var gc GroupClaims
	rid, err := s.Resolve(ctx, h)
	switch {
	case err == nil:
		gc.RID = rid
		gc.CIDs = slices.Clone(s.groups.cidsOf(rid))
	case errors.Is(err, ErrNotFound) && !IsRID(h) && isPeerCID(h):
		gc.CIDs = []string{h}
	default:
		return GroupClaims{}, err
	}
	q := `SELECT key, pid, value, ts, id, sig FROM claim WHERE cid = ? AND value IS NOT NULL`
	args := []any{nil}
	if f.Key != "" {
		q += ` AND key = ?`
		args = append(args, f.Key)
	}
	if f.UID != "" {
		pid, ok := s.princ.pidOf(f.UID)
		if !ok {
			if gc.RID == "" {
				return GroupClaims{}, fmt.Errorf("claims of %s: %w", h, ErrNotFound)
			}
			return gc, nil
		}
		q += ` AND pid = ?`
		args = append(args, pid)
	}
	for _, cid := range gc.CIDs {
		args[0] = cid
		cs, err := s.queryClaims(ctx, q, cid, args...)
		if err != nil {
			return GroupClaims{}, fmt.Errorf("claims of %s: %w", h, err)
		}
		gc.Claims = append(gc.Claims, cs...)
	}
	if gc.RID == "" && len(gc.Claims) == 0 {
		return GroupClaims{}, fmt.Errorf("claims of %s: %w", h, ErrNotFound)
	}
	return gc, nil
}

// queryClaims reads claims of one cid: columns key, pid, value, ts, id, sig.
func (s *Store) queryClaims(ctx context.Context, q, cid string, args ...any) ([]Claim, error) {
	rows, err := s.truthR.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Claim
	for rows.Next() {
		var key string
		var pid, ts int64
		var val any
		var id, sig []byte
		if err := rows.Scan(&key, &pid, &val, &ts, &id, &sig); err != nil {
			return nil, err
		}
		r := rowFromValue(pid, val, ts, asID(id))
		if !s.checked(cid, key, &r) {
			continue // damaged: never served (damage.go)
		}
		out = append(out, claimOf(s.princ.uidOf(pid), cid, key, &r, sig))
	}
	return out, rows.Err()
}

// RIDs returns every record id, sorted.
func (s *Store) RIDs(ctx context.Context) (_ []string, err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return nil, err
	}
	rows, err := s.cacheR.QueryContext(ctx, `SELECT k FROM kv WHERE k >= 'idx:roots/' AND k < 'idx:roots0' ORDER BY k`)
	if err != nil {
		return nil, fmt.Errorf("rids: %w", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("rids: %w", err)
		}
		out = append(out, strings.TrimPrefix(k, "idx:roots/"))
	}
	return out, rows.Err()
}

// listFields are the fields of a listing row.
var listFields = []string{"title", "fileName", "filePath", "type", "year"}

// List returns a page of records in rid order and the total count.
func (s *Store) List(ctx context.Context, offset, limit int) (_ []ListItem, _ int, err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return nil, 0, err
	}
	if limit <= 0 {
		limit = 100
	}
	offset = max(offset, 0)
	tx, err := s.cacheR.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, 0, fmt.Errorf("list: %w", err)
	}
	defer tx.Rollback()
	var total int
	var n string
	err = tx.QueryRowContext(ctx, `SELECT v FROM kv WHERE k = 'idx:count/records'`).Scan(&n)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, 0, fmt.Errorf("list: %w", err)
	}
	total = int(parseInt(n))
	rows, err := tx.QueryContext(ctx, `SELECT k FROM kv WHERE k >= 'idx:roots/' AND k < 'idx:roots0' ORDER BY k LIMIT ? OFFSET ?`, limit, offset)
	if err != nil {
		return nil, 0, fmt.Errorf("list: %w", err)
	}
	var rids []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return nil, 0, fmt.Errorf("list: %w", err)
		}
		rids = append(rids, strings.TrimPrefix(k, "idx:roots/"))
	}
	rows.Close()
	items := make([]ListItem, 0, len(rids))
	for _, rid := range rids {
		vals, err := fieldsOf(ctx, tx, rid, listFields)
		if err != nil {
			return nil, 0, fmt.Errorf("list: %w", err)
		}
		items = append(items, ListItem{RID: rid, Title: vals["title"], FileName: vals["fileName"],
			FilePath: vals["filePath"], Type: vals["type"], Year: vals["year"]})
	}
	return items, total, nil
}

// fieldsOf reads some merged fields of a record.
func fieldsOf(ctx context.Context, tx *sql.Tx, rid string, fields []string) (map[string]string, error) {
	args := make([]any, len(fields))
	for i, f := range fields {
		args[i] = fieldKey(rid, f)
	}
	q := `SELECT k, v FROM kv WHERE k IN (?` + strings.Repeat(`, ?`, len(fields)-1) + `)`
	return queryFields(ctx, tx, q, args...)
}

// queryFields runs a query over merged rows (k, v) and maps field → value.
func queryFields(ctx context.Context, tx *sql.Tx, q string, args ...any) (map[string]string, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		if _, f, ok := splitFieldKey(k); ok {
			out[f] = v
		}
	}
	return out, rows.Err()
}

// Schema counts merged fields by path (numeric segments folded to "*").
func (s *Store) Schema(ctx context.Context) (_ map[string]SchemaField, err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return nil, err
	}
	rows, err := s.cacheR.QueryContext(ctx, `SELECT k, v FROM kv WHERE k >= 'idx:schema/' AND k < 'idx:schema0'`)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	defer rows.Close()
	out := map[string]SchemaField{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("schema: %w", err)
		}
		out[strings.TrimPrefix(k, "idx:schema/")] = schemaField(parseSchemaCounts(v))
	}
	return out, rows.Err()
}

// Stats returns store-wide counters.
func (s *Store) Stats(ctx context.Context) (_ Stats, err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return Stats{}, err
	}
	st := &s.stats
	var out Stats
	out.Records = st.records.Load()
	out.Claims = st.live.Load()
	out.Tombstones = st.tomb.Load()
	out.Signers = int64(s.princ.len())
	out.Files.Count = st.files.Load()
	out.Files.TotalSize = st.fileSize.Load()
	out.LastSeq = st.lastSeq.Load()
	out.AppliedSeq = st.appliedSeq.Load()
	return out, nil
}

// Merge checks and verifies claims and merges them in memory, storing
// nothing; as overlays that signer's votes (given and held by this node).
// Every valid claim given counts (the caller chose them); each signer
// counts once per key, by its winning claim, and each home once, by the
// homes this node knows (a signer it knows none for is its own home).
// Links are not merged.
func (s *Store) Merge(ctx context.Context, claims []Claim, as string) (MergeResult, error) {
	if err := s.ready(); err != nil {
		return MergeResult{}, err
	}
	res := MergeResult{Fields: map[string]string{}, NSrc: map[string]int{}, Rejected: []Rejection{}}
	ids := make([]ID, len(claims))
	skip := make([]bool, len(claims))
	now := s.cfg.Now()
	for i := range claims {
		ids[i] = claims[i].ID()
		if err := claims[i].Check(now, s.cfg.MaxSkew); err != nil {
			res.Rejected = append(res.Rejected, Rejection{Index: i, Err: err})
			skip[i] = true
		}
	}
	errs := VerifyAll(claims, ids, skip)
	pids := map[string]int64{}
	pidOf := func(uid string) int64 {
		if p, ok := pids[uid]; ok {
			return p
		}
		pids[uid] = int64(len(pids) + 1)
		return pids[uid]
	}
	byKey := map[string][]row{}
	seen := map[ID]bool{}
	cids := map[string]bool{}
	for i := range claims {
		if skip[i] {
			continue
		}
		if errs[i] != nil {
			res.Rejected = append(res.Rejected, Rejection{Index: i, Err: errs[i]})
			continue
		}
		c := &claims[i]
		cids[c.CID] = true
		if seen[ids[i]] || IsLinkKey(c.Key) {
			continue
		}
		seen[ids[i]] = true
		byKey[c.Key] = append(byKey[c.Key], rowOf(pidOf(c.UID), c, ids[i]))
	}
	// Every signer counts, in its home as this node sees it.
	view := s.trust.Load()
	uids := make(map[int64]string, len(pids))
	for u, p := range pids {
		uids[p] = u
	}
	home := func(pid int64) (string, bool) { return view.homeOf(uids[pid]), true }
	for k, rows := range byKey {
		if v, n, ok := mergeRows(rows, home); ok {
			res.Fields[k], res.NSrc[k] = v, n
		}
	}
	if as == "" {
		return res, nil
	}
	// The viewer's votes: the ones given, and the ones this node holds on
	// the groups of the cids given.
	best := map[string]row{}
	asPID := pidOf(as)
	for k, rows := range byKey {
		for i := range rows {
			if rows[i].pid == asPID {
				if b, ok := best[k]; !ok || rows[i].beats(&b) {
					best[k] = rows[i]
				}
			}
		}
	}
	if _, ok := s.princ.pidOf(as); ok {
		held := map[string]bool{}
		for c := range cids {
			held[c] = true
			if rid, ok := s.groups.ridOf(c); ok {
				for _, gc := range s.groups.cidsOf(rid) {
					held[gc] = true
				}
			}
		}
		qctx, err := quick(ctx)
		if err != nil {
			return MergeResult{}, err
		}
		if err := s.overlayRows(qctx, sortedKeys(held), as, best); err != nil {
			return MergeResult{}, fmt.Errorf("merge: %w", err)
		}
	}
	for k, r := range best {
		if r.kind == KindText {
			res.Fields[k] = r.val
		}
	}
	return res, nil
}

// overlayRows folds the signer's stored votes on cids into best.
func (s *Store) overlayRows(ctx context.Context, cids []string, as string, best map[string]row) error {
	pid, ok := s.princ.pidOf(as)
	if !ok {
		return nil
	}
	for _, cid := range cids {
		rows, err := s.rd.votesOf.QueryContext(ctx, cid, pid)
		if err != nil {
			return err
		}
		for rows.Next() {
			var key string
			var val any
			var ts int64
			var id []byte
			if err := rows.Scan(&key, &val, &ts, &id); err != nil {
				rows.Close()
				return err
			}
			if IsLinkKey(key) {
				continue
			}
			r := rowFromValue(pid, val, ts, asID(id))
			if !s.checked(cid, key, &r) {
				continue // damaged: never served (damage.go)
			}
			if b, seen := best[key]; !seen || r.beats(&b) {
				best[key] = r
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	return nil
}
