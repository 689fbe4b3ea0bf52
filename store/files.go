package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ApplyFiles applies file watcher changes in one transaction.
func (s *Store) ApplyFiles(ctx context.Context, updates []FileUpdate) ([]FileResult, error) {
	for i, u := range updates {
		if err := checkFileUpdate(u); err != nil {
			return nil, fmt.Errorf("file update %d: %w", i, err)
		}
	}
	if len(updates) == 0 {
		return []FileResult{}, nil
	}
	r := &request{kind: reqFiles, files: updates, fileResults: make([]FileResult, len(updates))}
	if err := s.do(ctx, r); err != nil {
		return nil, fmt.Errorf("apply files: %w", err)
	}
	return r.fileResults, nil
}

func checkFileUpdate(u FileUpdate) error {
	switch u.Op {
	case FileReset:
		return nil
	case FileAdd, FileChange, FileRename:
		if err := CheckCID(u.File.CID); err != nil {
			return err
		}
		if isPeerCID(u.File.CID) {
			// A node's id, not content: its claims are vouches and form
			// no record, which a file would make them.
			return fmt.Errorf("%w: %s is a peer id, not a file's content id", ErrBadCID, u.File.CID)
		}
		if u.File.Size < 0 {
			return fmt.Errorf("%w: negative size", ErrBadPath)
		}
	case FileDelete:
	default:
		return fmt.Errorf("%w: unknown file op %q", ErrBadPath, u.Op)
	}
	if u.File.Path == "" || strings.ContainsRune(u.File.Path, 0) {
		return fmt.Errorf("%w: empty path", ErrBadPath)
	}
	if u.Op == FileRename && u.OldPath == "" {
		return fmt.Errorf("%w: a rename needs the old path", ErrBadPath)
	}
	return nil
}

// applyFiles writes one request's file changes to local_file, marks the
// records whose box-local fields may change, and appends the file events.
func (w *writer) applyFiles(b *batch, r *request) error {
	dest := make([]driver.Value, 2)
	g := w.s.groups
	// forget removes path and returns the cid it held.
	forget := func(path string) (string, bool, error) {
		ok, err := w.cLocalGet.one(dest, path)
		if err != nil || !ok {
			return "", false, err
		}
		cid, size := asString(dest[0]), asInt(dest[1])
		if _, err := w.cLocalDel.exec(path); err != nil {
			return "", false, err
		}
		w.files--
		w.fileSize -= size
		if rid, ok := g.ridOf(cid); ok {
			b.local[rid] = true
		}
		return cid, true, nil
	}
	for i, u := range r.files {
		evPath := u.EventPath
		if evPath == "" {
			evPath = u.File.Path
		}
		f := u.File
		switch u.Op {
		case FileAdd, FileChange, FileRename:
			var existed bool
			var err error
			if u.Op == FileRename {
				if _, _, err = forget(u.OldPath); err != nil {
					return err
				}
			}
			if _, existed, err = forget(f.Path); err != nil {
				return err
			}
			if _, err := w.cLocalPut.exec(f.Path, f.CID, f.Size, f.MtimeNano); err != nil {
				return err
			}
			w.files++
			w.fileSize += f.Size
			rid, _ := g.ridOf(f.CID)
			b.local[rid] = true
			r.fileResults[i] = FileResult{RID: rid, Created: !existed && u.Op != FileRename}
			old := ""
			if u.Op == FileRename {
				old = u.EventOld
				if old == "" {
					old = u.OldPath
				}
			}
			data := fileEventData(string(u.Op), evPath, strconv.FormatInt(f.Size, 10), f.CID, old, b.nowMS)
			if err := w.emit(b, StreamFiles, string(u.Op), data); err != nil {
				return err
			}
		case FileDelete:
			cid, existed, err := forget(f.Path)
			if err != nil {
				return err
			}
			if existed {
				r.fileResults[i].RID, _ = g.ridOf(cid)
			}
			if err := w.emit(b, StreamFiles, string(u.Op), fileEventData(string(u.Op), evPath, "", "", "", b.nowMS)); err != nil {
				return err
			}
		case FileReset:
			err := w.c.queryOnce(`SELECT DISTINCT midhash FROM local_file`, func(d []driver.Value) error {
				if rid, ok := g.ridOf(asString(d[0])); ok {
					b.local[rid] = true
				}
				return nil
			})
			if err != nil {
				return err
			}
			if err := w.c.exec(`DELETE FROM local_file`); err != nil {
				return err
			}
			w.files, w.fileSize = 0, 0
			if _, err := w.cDelRange.exec(evPrefix(StreamFiles), evEnd(StreamFiles)); err != nil {
				return err
			}
			w.ev[StreamFiles].count = 0
			if err := w.markGap(b, StreamFiles); err != nil {
				return err
			}
			if err := w.emit(b, StreamFiles, "reset", fileEventData("reset", "", "", "", "", b.nowMS)); err != nil {
				return err
			}
		}
	}
	return nil
}

// LocalFiles returns every local_file row (the watcher compares them with
// the disk to skip unchanged files).
func (s *Store) LocalFiles(ctx context.Context) (_ []LocalFile, err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return nil, err
	}
	rows, err := s.cacheR.QueryContext(ctx, `SELECT path, midhash, size, mtime FROM local_file ORDER BY path`)
	if err != nil {
		return nil, fmt.Errorf("local files: %w", err)
	}
	defer rows.Close()
	var out []LocalFile
	for rows.Next() {
		var f LocalFile
		if err := rows.Scan(&f.Path, &f.CID, &f.Size, &f.MtimeNano); err != nil {
			return nil, fmt.Errorf("local files: %w", err)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// LocalFileForCID returns the local file of the record holding cid (the
// lexicographically first path). ErrNotFound when there is none.
func (s *Store) LocalFileForCID(ctx context.Context, cid string) (_ LocalFile, err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return LocalFile{}, err
	}
	cids := []string{cid}
	if rid, ok := s.groups.ridOf(cid); ok {
		cids = s.groups.cidsOf(rid)
	}
	var best LocalFile
	found := false
	for _, c := range cids {
		var f LocalFile
		err := s.cacheR.QueryRowContext(ctx, `SELECT path, midhash, size, mtime FROM local_file WHERE midhash = ? ORDER BY path LIMIT 1`, c).
			Scan(&f.Path, &f.CID, &f.Size, &f.MtimeNano)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return LocalFile{}, fmt.Errorf("local file: %w", err)
		}
		if !found || f.Path < best.Path {
			best, found = f, true
		}
	}
	if !found {
		return LocalFile{}, fmt.Errorf("local file for %s: %w", cid, ErrNotFound)
	}
	return best, nil
}

// FileTuples lists the local files, one tuple per file under the files
// root (a record with two local paths gives two), with the size and mtime
// the watcher saw on disk and the rid of the record holding the file's
// cid; the total is their size. It reads local_file rather than the merged
// view, so count and total agree with Stats().Files, and a signed sizeByte
// (which any trusted signer may claim) never changes what this box reports
// about its own files. Ordered by path.
func (s *Store) FileTuples(ctx context.Context) (_ []FileTuple, _ int64, err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return nil, 0, err
	}
	// A LEFT JOIN: every local file is listed even if its record were
	// missing (it never is: a new cid gets one in the same transaction).
	rows, err := s.cacheR.QueryContext(ctx, `SELECT coalesce(kv.v, ''), lf.path, lf.size, lf.mtime
		FROM local_file lf LEFT JOIN kv ON kv.k = 'cid:' || lf.midhash ORDER BY lf.path`)
	if err != nil {
		return nil, 0, fmt.Errorf("file tuples: %w", err)
	}
	defer rows.Close()
	out := []FileTuple{}
	var total int64
	for rows.Next() {
		var t FileTuple
		if err := rows.Scan(&t.RID, &t.FilePath, &t.SizeByte, &t.MtimeNano); err != nil {
			return nil, 0, fmt.Errorf("file tuples: %w", err)
		}
		out = append(out, t)
		total += t.SizeByte
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("file tuples: %w", err)
	}
	return out, total, nil
}

// splitFieldKey splits "file:<rid>/<field>".
func splitFieldKey(k string) (rid, field string, ok bool) {
	rest, ok := strings.CutPrefix(k, "file:")
	if !ok || len(rest) < 28 || rest[26] != '/' {
		return "", "", false
	}
	return rest[:26], rest[27:], true
}
