package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The writer talks to its two connections through the driver interfaces
// directly (inside sql.Conn.Raw): it owns them for its whole life, and
// skipping database/sql's per-call conversion and locking is a measurable
// share of the per-claim budget. Statements run with context.Background so
// the driver starts no cancellation watcher per call; the writer checks its
// own context between batches.

// rawConn is one of the writer's connections.
type rawConn struct {
	c     driver.Conn
	stmts []*rawStmt
}

// rawStmt is a prepared statement with a reusable argument slice. before,
// when set, runs first at every use (the cache's reads and deletes of kv
// write the buffered kv upserts first).
type rawStmt struct {
	st     driver.Stmt
	args   []driver.NamedValue
	sql    string
	before func() error
}

var bg = context.Background()

func (rc *rawConn) prepare(query string) (*rawStmt, error) {
	st, err := rc.c.(driver.ConnPrepareContext).PrepareContext(bg, query)
	if err != nil {
		return nil, fmt.Errorf("prepare %q: %w", query, err)
	}
	p := &rawStmt{st: st, sql: query}
	rc.stmts = append(rc.stmts, p)
	return p, nil
}

// exec runs a statement without arguments (BEGIN, COMMIT, DDL).
func (rc *rawConn) exec(query string) error {
	_, err := rc.c.(driver.ExecerContext).ExecContext(bg, query, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", query, err)
	}
	return nil
}

// closeStmts finalizes every prepared statement.
func (rc *rawConn) closeStmts() {
	for _, p := range rc.stmts {
		_ = p.st.Close()
	}
	rc.stmts = nil
}

func (p *rawStmt) bind(vals []driver.Value) {
	for len(p.args) < len(vals) {
		p.args = append(p.args, driver.NamedValue{Ordinal: len(p.args) + 1})
	}
	p.args = p.args[:len(vals)]
	for i := range p.args {
		p.args[i].Value = vals[i]
	}
}

func (p *rawStmt) clear() {
	for i := range p.args {
		p.args[i].Value = nil
	}
}

// exec runs the statement and returns the number of rows changed.
func (p *rawStmt) exec(vals ...driver.Value) (int64, error) {
	res, err := p.run(vals)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// execID runs an insert and returns the new rowid.
func (p *rawStmt) execID(vals ...driver.Value) (int64, error) {
	res, err := p.run(vals)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

func (p *rawStmt) run(vals []driver.Value) (driver.Result, error) {
	if p.before != nil {
		if err := p.before(); err != nil {
			return nil, err
		}
	}
	p.bind(vals)
	res, err := p.st.(driver.StmtExecContext).ExecContext(bg, p.args)
	p.clear()
	if err != nil {
		return nil, fmt.Errorf("exec %q: %w", p.sql, err)
	}
	return res, nil
}

// query runs the statement and calls fn for each row; dest is reused
// between rows, so fn must copy what it keeps (strings and []byte values
// the driver returns are already copies).
func (p *rawStmt) query(fn func(dest []driver.Value) error, vals ...driver.Value) error {
	if p.before != nil {
		if err := p.before(); err != nil {
			return err
		}
	}
	p.bind(vals)
	rows, err := p.st.(driver.StmtQueryContext).QueryContext(bg, p.args)
	p.clear()
	if err != nil {
		return fmt.Errorf("query %q: %w", p.sql, err)
	}
	dest := make([]driver.Value, len(rows.Columns()))
	for {
		err := rows.Next(dest)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			rows.Close()
			return fmt.Errorf("query %q: %w", p.sql, err)
		}
		if err := fn(dest); err != nil {
			rows.Close()
			return err
		}
	}
	return rows.Close()
}

// one runs a query expected to return at most one row; ok is false when
// there was none.
func (p *rawStmt) one(dest []driver.Value, vals ...driver.Value) (bool, error) {
	if p.before != nil {
		if err := p.before(); err != nil {
			return false, err
		}
	}
	p.bind(vals)
	rows, err := p.st.(driver.StmtQueryContext).QueryContext(bg, p.args)
	p.clear()
	if err != nil {
		return false, fmt.Errorf("query %q: %w", p.sql, err)
	}
	err = rows.Next(dest)
	cerr := rows.Close()
	switch {
	case errors.Is(err, io.EOF):
		return false, cerr
	case err != nil:
		return false, fmt.Errorf("query %q: %w", p.sql, err)
	}
	return true, cerr
}

// asString and asInt read driver values of a known column type.
func asString(v driver.Value) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case int64:
		return fmt.Sprint(x)
	}
	return ""
}

func asInt(v driver.Value) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case float64:
		return int64(x)
	case string:
		return parseInt(x)
	}
	return 0
}

func asID(v driver.Value) ID {
	var id ID
	if b, ok := v.([]byte); ok {
		copy(id[:], b)
	}
	return id
}

// rowsPerStmt is how many rows one multi-row INSERT carries: a statement
// execution costs about as much as a row's insert again (binding, the VM's
// start and reset, the driver's calls), so appends of many rows go in
// chunks.
const rowsPerStmt = 64

// multiValues returns "(?, ?), (?, ?), …": rows groups of width placeholders.
func multiValues(rows, width int) string {
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", width), ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(one+", ", rows), ", ")
}

// execRows inserts the rows in vals (width values each): full chunks with
// multi (rowsPerStmt rows), the rest with single.
func execRows(multi, single *rawStmt, width int, vals []driver.Value) error {
	chunk := rowsPerStmt * width
	for len(vals) >= chunk {
		if _, err := multi.exec(vals[:chunk]...); err != nil {
			return err
		}
		vals = vals[chunk:]
	}
	for len(vals) > 0 {
		if _, err := single.exec(vals[:width]...); err != nil {
			return err
		}
		vals = vals[width:]
	}
	return nil
}
