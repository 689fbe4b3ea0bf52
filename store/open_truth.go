package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// checkTruthFile refuses a truth file of 0 bytes before SQLite sees it:
// SQLite would take it for a new database, and the node would start empty
// over what was a failed copy or restore. (A new database that crashed
// before its first checkpoint is 0 bytes with its content in the -wal
// file: that one is opened.) It reports whether the file existed.
func checkTruthFile(path string) (existed bool, err error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if fi.Mode().IsRegular() && fi.Size() == 0 {
		if wal, err := os.Stat(path + "-wal"); err == nil && wal.Size() > 0 {
			return true, nil
		}
		return true, fmt.Errorf("%w: %s is empty (0 bytes): restore it from a backup (docs/operations.md, Restore), or delete it to start empty",
			ErrDamaged, path)
	}
	return true, nil
}

// warnNewTruthBesideCache warns when this Open made a new, empty truth
// file while the cache records another truth file's id: the truth was
// lost (deleted, a wrong path, a failed restore), and the cache, which is
// about to be rebuilt empty, was the last sign of it. A first start has
// no cache and says nothing.
func (s *Store) warnNewTruthBesideCache(ctx context.Context, c *sql.Conn, truthPath, cachePath string) {
	if !s.truthNew {
		return
	}
	var old string
	if err := c.QueryRowContext(ctx, `SELECT v FROM kv WHERE k = 'meta:truth_id'`).Scan(&old); err != nil || old == "" || old == s.truthID {
		return
	}
	s.log.Warn("a new, empty truth.db was made next to a cache of another one: if you meant to keep your claims, stop and restore truth.db from a backup (docs/operations.md, Restore)",
		"truth", truthPath, "cache", cachePath)
}

// damagedAtStart turns an error of a start-up step after the truth file's
// first open (loading its state, regrouping, rebuilding or catching up the
// cache from it) into ErrDamaged when the truth file is at fault. SQLite
// says "corrupt" without saying which file, and the cache rebuild reads
// both, so a corrupt answer is settled by checking truth (PRAGMA
// quick_check, on this failure path only: at a million claims it reads
// the whole file, 1 to 20 s). A cache at fault gets its own advice: it is
// derived, so deleting it loses nothing.
func damagedAtStart(ctx context.Context, truthPath, cachePath string, err error) error {
	if errors.Is(err, ErrDamaged) || !isCorrupt(err) {
		return err
	}
	if cerr := quickCheck(ctx, truthPath); cerr != nil {
		if ctx.Err() != nil {
			return err
		}
		return damagedFile(truthPath, fmt.Errorf("%w; quick_check: %w", err, cerr))
	}
	return fmt.Errorf("%w: %w: %s checks out, so the cache %s is damaged: delete it (with its -wal and -shm files) and start again; it is rebuilt from truth", errCacheDamaged, err, filepath.Base(truthPath), cachePath)
}

// errCacheDamaged is damagedAtStart's answer when the cache is at fault:
// Open deletes the cache and tries once more.
var errCacheDamaged = errors.New("damaged cache")

// isCorrupt reports SQLite's "corrupt" and "not a database" answers.
func isCorrupt(err error) bool {
	var se interface{ Code() int }
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqliteCorrupt, sqliteNotADB:
		return true
	}
	return false
}

// quickCheck runs PRAGMA quick_check on a database file through a
// connection of its own; nil means SQLite found nothing wrong.
func quickCheck(ctx context.Context, path string) error {
	db, err := openDB(path, readPool, 1)
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `PRAGMA quick_check(8)`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var found []error
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return err
		}
		if line != "ok" {
			found = append(found, errors.New(line))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return errors.Join(found...)
}
