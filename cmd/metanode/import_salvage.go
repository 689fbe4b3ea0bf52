package main

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/metanode/metanode/store"
)

// A SQLite file cut short (a copy that stopped, a full disk) has lost its
// last pages, and with them, often, interior pages of the tables: SQLite
// then reaches none of the rows beneath them, though the leaf pages that
// hold those rows are still in the file. So the import reads such a file
// page by page itself (the file format is SQLite's documented one) and
// copies the rows of the layout's tables that the remaining leaf pages
// hold into a new database, which it then imports as usual: its rows keep
// their keys, so a rerun salvages and resumes the same way.

// sqliteHeader is what the salvage needs of a database file's header.
type sqliteHeader struct {
	pageSize   int
	usable     int    // page size less the reserved bytes at each page's end
	pages      uint32 // pages the header says the file has (0: not known)
	freeTrunk  uint32 // first freelist trunk page
	filePages  uint32 // whole pages the file holds
	utf8       bool
	cutShort   bool
	headerSize int64
}

// readSQLiteHeader reads path's header; cutShort says the file holds fewer
// pages than its header counts.
func readSQLiteHeader(path string) (sqliteHeader, error) {
	var h sqliteHeader
	f, err := os.Open(path)
	if err != nil {
		return h, err
	}
	defer f.Close()
	var b [100]byte
	if _, err := io.ReadFull(f, b[:]); err != nil || string(b[:16]) != "SQLite format 3\x00" {
		return h, errors.New("not a SQLite database")
	}
	fi, err := f.Stat()
	if err != nil {
		return h, err
	}
	h.pageSize = int(binary.BigEndian.Uint16(b[16:]))
	if h.pageSize == 1 {
		h.pageSize = 65536
	}
	if h.pageSize < 512 || h.pageSize&(h.pageSize-1) != 0 {
		return h, fmt.Errorf("page size %d in the header", h.pageSize)
	}
	h.usable = h.pageSize - int(b[20])
	// The header's page count holds only when its change counter matches
	// the version-valid-for number.
	if binary.BigEndian.Uint32(b[24:]) == binary.BigEndian.Uint32(b[92:]) {
		h.pages = binary.BigEndian.Uint32(b[28:])
	}
	h.freeTrunk = binary.BigEndian.Uint32(b[32:])
	h.utf8 = binary.BigEndian.Uint32(b[56:]) <= 1
	h.filePages = uint32(fi.Size() / int64(h.pageSize))
	h.cutShort = h.pages > h.filePages || fi.Size()%int64(h.pageSize) != 0
	h.headerSize = fi.Size()
	return h, nil
}

// pageReader reads the pages of a database file.
type pageReader struct {
	f    *os.File
	h    sqliteHeader
	free map[uint32]bool // freelist pages: their content is no table's
}

func (r *pageReader) page(n uint32) ([]byte, error) {
	if n == 0 || n > r.h.filePages {
		return nil, fmt.Errorf("page %d is not in the file", n)
	}
	b := make([]byte, r.h.pageSize)
	_, err := r.f.ReadAt(b, int64(n-1)*int64(r.h.pageSize))
	return b, err
}

// freelist collects the freelist's pages, as far as the file holds them.
func (r *pageReader) freelist() {
	r.free = map[uint32]bool{}
	for t := r.h.freeTrunk; t != 0 && !r.free[t]; {
		b, err := r.page(t)
		if err != nil {
			return
		}
		r.free[t] = true
		n := min(int(binary.BigEndian.Uint32(b[4:])), (r.h.usable-8)/4)
		for i := range n {
			r.free[binary.BigEndian.Uint32(b[8+4*i:])] = true
		}
		t = binary.BigEndian.Uint32(b)
	}
}

// leafRow is one row a leaf page holds: an index b-tree's (a WITHOUT
// ROWID table, an index) record, or a table b-tree's rowid and record.
type leafRow struct {
	table bool
	rowid int64
	vals  []any
}

// rows calls fn with every row of every leaf page the file holds, skipping
// the freelist and cells it cannot decode.
func (r *pageReader) rows(fn func(leafRow) error) error {
	for n := uint32(1); n <= r.h.filePages; n++ {
		if r.free[n] {
			continue
		}
		b, err := r.page(n)
		if err != nil {
			return err
		}
		hdr := 0
		if n == 1 {
			hdr = 100
		}
		if typ := b[hdr]; typ != 0x0a && typ != 0x0d {
			continue
		}
		if err := r.leaf(b, hdr, fn); err != nil {
			return err
		}
	}
	return nil
}

// leaf decodes the cells of one leaf page.
func (r *pageReader) leaf(b []byte, hdr int, fn func(leafRow) error) error {
	table := b[hdr] == 0x0d
	cells := int(binary.BigEndian.Uint16(b[hdr+3:]))
	for i := range cells {
		p := hdr + 8 + 2*i
		if p+2 > len(b) {
			return nil
		}
		row, ok := r.cell(b, int(binary.BigEndian.Uint16(b[p:])), table)
		if !ok {
			continue
		}
		if err := fn(row); err != nil {
			return err
		}
	}
	return nil
}

// cell decodes one leaf cell at off (false: it does not decode).
func (r *pageReader) cell(b []byte, off int, table bool) (leafRow, bool) {
	row := leafRow{table: table}
	if off <= 0 || off >= len(b) {
		return row, false
	}
	size, n := sqliteVarint(b[off:])
	if n == 0 || size > 1<<30 {
		return row, false
	}
	off += n
	if table {
		id, n := sqliteVarint(b[off:])
		if n == 0 {
			return row, false
		}
		row.rowid, off = int64(id), off+n
	}
	payload, ok := r.payload(b, off, int(size), table)
	if !ok {
		return row, false
	}
	vals, err := decodeRecord(payload)
	if err != nil {
		return row, false
	}
	row.vals = vals
	return row, true
}

// payload returns a cell's payload of size bytes starting at off, with
// its overflow pages (false when one is lost).
func (r *pageReader) payload(b []byte, off, size int, table bool) ([]byte, bool) {
	u := r.h.usable
	x := u - 35
	if !table {
		x = (u-12)*64/255 - 23
	}
	local := size
	if size > x {
		m := (u-12)*32/255 - 23
		local = m + (size-m)%(u-4)
		if local > x {
			local = m
		}
	}
	if off+local > len(b) {
		return nil, false
	}
	out := append(make([]byte, 0, size), b[off:off+local]...)
	if local == size {
		return out, true
	}
	if off+local+4 > len(b) {
		return nil, false
	}
	next := binary.BigEndian.Uint32(b[off+local:])
	for len(out) < size {
		if r.free[next] {
			return nil, false
		}
		ov, err := r.page(next)
		if err != nil {
			return nil, false
		}
		take := min(size-len(out), u-4)
		out = append(out, ov[4:4+take]...)
		next = binary.BigEndian.Uint32(ov)
	}
	return out, true
}

// sqliteVarint decodes SQLite's big-endian varint (n = 0: not one).
func sqliteVarint(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < 9 && i < len(b); i++ {
		if i == 8 {
			return v<<8 | uint64(b[i]), 9
		}
		v = v<<7 | uint64(b[i]&0x7f)
		if b[i] < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}

// decodeRecord decodes a record: NULL, int64, float64, string or []byte.
func decodeRecord(p []byte) ([]any, error) {
	hsize, n := sqliteVarint(p)
	if n == 0 || hsize > uint64(len(p)) || hsize < uint64(n) {
		return nil, errors.New("bad record header")
	}
	var types []uint64
	for i := n; i < int(hsize); {
		t, m := sqliteVarint(p[i:int(hsize)])
		if m == 0 {
			return nil, errors.New("bad serial type")
		}
		types, i = append(types, t), i+m
	}
	body := p[hsize:]
	vals := make([]any, len(types))
	for i, t := range types {
		v, size, err := recordValue(t, body)
		if err != nil {
			return nil, err
		}
		vals[i], body = v, body[size:]
	}
	return vals, nil
}

// recordValue decodes one value of serial type t from the start of b.
func recordValue(t uint64, b []byte) (any, int, error) {
	intSizes := [...]int{0, 1, 2, 3, 4, 6, 8}
	switch {
	case t == 0:
		return nil, 0, nil
	case t <= 6:
		size := intSizes[t]
		if len(b) < size {
			return nil, 0, errors.New("short record")
		}
		var v int64
		for _, c := range b[:size] {
			v = v<<8 | int64(c)
		}
		if shift := 64 - 8*size; b[0]&0x80 != 0 { // sign-extend
			v = v << shift >> shift
		}
		return v, size, nil
	case t == 7:
		if len(b) < 8 {
			return nil, 0, errors.New("short record")
		}
		return math.Float64frombits(binary.BigEndian.Uint64(b)), 8, nil
	case t == 8, t == 9:
		return int64(t - 8), 0, nil
	case t >= 12:
		if (t-12)/2 > uint64(len(b)) {
			return nil, 0, errors.New("short record")
		}
		size := int((t - 12) / 2)
		if t%2 == 1 {
			return string(b[:size]), size, nil
		}
		return append([]byte(nil), b[:size]...), size, nil
	}
	return nil, 0, errors.New("reserved serial type")
}

// salvageSchema are the tables a salvaged copy has, by layout. Columns
// without a type keep what they were given (text stays text, a blob a
// blob), as the originals do.
var salvageSchema = map[string][]string{
	layoutKV: {"CREATE TABLE kv(k TEXT PRIMARY KEY, v) WITHOUT ROWID"},
	layoutClaims: {
		"CREATE TABLE principal(pid INTEGER PRIMARY KEY, uid TEXT)",
		"CREATE TABLE claim(cid TEXT, key TEXT, pid INTEGER, value, ts INTEGER, sig BLOB, PRIMARY KEY(cid, key, pid)) WITHOUT ROWID",
		"CREATE TABLE cid_group(cid TEXT PRIMARY KEY, rid TEXT) WITHOUT ROWID",
		"CREATE TABLE meta(name TEXT PRIMARY KEY, value TEXT)",
	},
}

// salvage copies the rows of the layout's tables that path's leaf pages
// hold into a new database in a temporary directory, and returns its path
// and how many rows it holds. A row is told by its shape: the kv table's
// rows are two texts (the kv b-tree's kind, from the schema); a v2 truth's
// claims have at least seven columns (cid, key, pid, value, ts, sig, …),
// its principals are (pid, uid) and its groups (cid, rid).
func salvage(ctx context.Context, path, layout string, kvWithoutRowid bool, h sqliteHeader) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	dir, err := os.MkdirTemp("", "metanode-import-")
	if err != nil {
		return "", 0, err
	}
	out := filepath.Join(dir, "salvaged.db")
	db, err := sql.Open("sqlite", out)
	if err != nil {
		os.RemoveAll(dir)
		return "", 0, err
	}
	defer db.Close()
	n, err := copyRows(ctx, db, &pageReader{f: f, h: h}, layout, kvWithoutRowid)
	if err != nil {
		os.RemoveAll(dir)
		return "", 0, fmt.Errorf("salvage %s: %w", path, err)
	}
	return out, n, nil
}

func copyRows(ctx context.Context, db *sql.DB, r *pageReader, layout string, kvWithoutRowid bool) (int64, error) {
	for _, s := range salvageSchema[layout] {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return 0, err
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if layout == layoutClaims {
		if _, err := tx.ExecContext(ctx, "INSERT INTO meta VALUES('schema-version', '3')"); err != nil {
			return 0, err
		}
	}
	r.freelist()
	var n int64
	err = r.rows(func(row leafRow) error {
		q, args := salvageInsert(layout, kvWithoutRowid, row)
		if q == "" {
			return nil
		}
		res, err := tx.ExecContext(ctx, q, args...)
		if err == nil {
			if k, _ := res.RowsAffected(); k > 0 {
				n++
			}
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

// salvageInsert is the statement that copies row, "" when it belongs to
// no table of the layout.
func salvageInsert(layout string, kvWithoutRowid bool, row leafRow) (string, []any) {
	v := row.vals
	text := func(i int) (string, bool) {
		s, ok := v[i].(string)
		return s, ok
	}
	if layout == layoutKV {
		k, ok := text(0)
		if len(v) != 2 || !ok || row.table == kvWithoutRowid {
			return "", nil
		}
		if _, isInt := v[1].(int64); isInt { // an index of a rowid table: (k, rowid)
			return "", nil
		}
		return "INSERT OR IGNORE INTO kv VALUES(?, ?)", []any{k, v[1]}
	}
	switch {
	case len(v) >= 7 && !row.table:
		cid, ok1 := text(0)
		key, ok2 := text(1)
		pid, ok3 := v[2].(int64)
		ts, ok4 := v[4].(int64)
		sig, ok5 := v[5].([]byte)
		if ok1 && ok2 && ok3 && ok4 && ok5 {
			return "INSERT OR IGNORE INTO claim VALUES(?, ?, ?, ?, ?, ?)", []any{cid, key, pid, v[3], ts, sig}
		}
	case len(v) == 2 && row.table && v[0] == nil: // principal(pid INTEGER PRIMARY KEY, uid)
		if uid, ok := text(1); ok && store.CheckUID(uid) == nil {
			return "INSERT OR IGNORE INTO principal VALUES(?, ?)", []any{row.rowid, uid}
		}
	case len(v) == 2:
		a, _ := text(0)
		if pid, ok := v[1].(int64); ok && store.CheckUID(a) == nil { // principal's uid index: (uid, pid)
			return "INSERT OR IGNORE INTO principal VALUES(?, ?)", []any{pid, a}
		}
		if rid, ok := text(1); ok && store.IsRID(rid) && store.CheckCID(a) == nil {
			return "INSERT OR IGNORE INTO cid_group VALUES(?, ?)", []any{a, rid}
		}
	}
	return "", nil
}

// kvWithoutRowid reads whether the kv table was made WITHOUT ROWID (its
// rows then sit in an index b-tree's leaves).
func kvWithoutRowid(ctx context.Context, db *sql.DB) bool {
	var q string
	_ = db.QueryRowContext(ctx, "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'kv'").Scan(&q)
	return strings.Contains(strings.ToUpper(q), "WITHOUT ROWID")
}
