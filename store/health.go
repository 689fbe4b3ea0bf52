package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// health is what the node's /health needs beyond "a read works": whether
// writes are failing now (a full disk answers every write 503 while reads
// go on), and whether the sync-set loader gave up. The writer and the
// loader set it; any goroutine reads it.
type health struct {
	mu       sync.Mutex
	failing  int       // write transactions failed in a row
	since    time.Time // the first of them
	lastErr  error     // the latest, with what to do
	syncLoad error     // the sync-set loader's error (it does not retry)
	damaged  error     // the first read that found a damaged page (sticky)
}

// noteWrite records the outcome of one write transaction (nil: it
// committed, and clears the failing state).
func (h *health) noteWrite(err error, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		h.failing, h.lastErr = 0, nil
		return
	}
	if h.failing == 0 {
		h.since = now
	}
	h.failing++
	h.lastErr = err
}

// WriteHealth is nil while writes commit. After a failed write
// transaction, until one commits again, it says since when writes fail,
// why, and what to do: the node reports itself degraded meanwhile.
func (s *Store) WriteHealth() error {
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failing == 0 {
		return nil
	}
	return fmt.Errorf("writes failing since %s (%d in a row): %w", h.since.UTC().Format(time.RFC3339), h.failing, h.lastErr)
}

// noteRead records a read that found a damaged database page and adds
// what to do to its error: a file damaged while the node runs (a failing
// disk) stays damaged, so /health reports it until a restart. Deferred by
// the exported reads with their named error.
func (s *Store) noteRead(err *error) {
	var told *advised
	if *err == nil || !isCorrupt(*err) || errors.As(*err, &told) {
		return // an exported read it went through said it already
	}
	*err = &advised{err: *err, advice: fmt.Sprintf("a database file is damaged: stop the node and delete %s (it is rebuilt from truth at the next start); if the node then refuses %s, restore it from a backup (docs/operations.md)",
		filepath.Base(s.cfg.CachePath), filepath.Base(s.cfg.TruthPath))}
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.damaged == nil {
		h.damaged = fmt.Errorf("reads failing since %s: %w", time.Now().UTC().Format(time.RFC3339), *err)
	}
}

// advised is an error with what the owner should do about it, added once
// however many layers the error goes through.
type advised struct {
	err    error
	advice string
}

func (e *advised) Error() string { return e.err.Error() + ": " + e.advice }
func (e *advised) Unwrap() error { return e.err }

// ReadHealth is nil unless a read found a damaged database page since the
// store opened; then it says since when and what to do.
func (s *Store) ReadHealth() error {
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.damaged
}

// SyncLoadErr is the sync-set loader's error: the set is then never ready
// and the node does not sync until it restarts.
func (s *Store) SyncLoadErr() error {
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.syncLoad
}

// SQLite primary result codes for a write that cannot go on (sqlite3.h).
const (
	sqliteIOErr = 10
	sqliteFull  = 13
)

// explain adds to an error of a write transaction on the truth file (or
// the cache file, truth false) what the owner should do, for the causes
// that need the owner: a full disk, an I/O error, a damaged file. Others
// come back as they are.
func explain(truth bool, path string, err error) error {
	var se interface{ Code() int }
	if !errors.As(err, &se) {
		return err
	}
	switch code := se.Code() & 0xff; {
	case code == sqliteFull, code == sqliteIOErr && diskFull(filepath.Dir(path)):
		return &advised{err, fmt.Sprintf("the disk holding %s is full: free space there and retry (nothing of the failed write was stored)", filepath.Dir(path))}
	case code == sqliteIOErr:
		return &advised{err, fmt.Sprintf("I/O error on %s: check the disk (full or failing?); nothing of the failed write was stored", path)}
	case code == sqliteCorrupt, code == sqliteNotADB:
		if truth {
			return damaged(path, err)
		}
		return fmt.Errorf("%w: %s is damaged: restart the node: the start deletes it and rebuilds it from truth", err, path)
	}
	return err
}

// explainStart adds what to do to a start that failed for want of a disk
// that takes writes: the start writes when the cache must catch up with
// truth or be rebuilt, or truth's groups redone. The stored claims are
// safe; the node needs room, or a working disk.
func explainStart(truthPath, cachePath string, err error) error {
	var se interface{ Code() int }
	var told *advised
	if err == nil || errors.As(err, &told) || !errors.As(err, &se) {
		return err
	}
	dirs := []string{filepath.Dir(truthPath)}
	if d := filepath.Dir(cachePath); d != dirs[0] {
		dirs = append(dirs, d)
	}
	full := slices.ContainsFunc(dirs, diskFull)
	switch code := se.Code() & 0xff; {
	case code == sqliteFull, code == sqliteIOErr && full:
		return &advised{err, fmt.Sprintf("the disk holding %s is full: free space there and start the node again (the stored claims are safe; the start needs room to bring the cache up to date)", strings.Join(dirs, " or "))}
	case code == sqliteIOErr:
		return &advised{err, fmt.Sprintf("I/O error on %s: check the disk (failing? unmounted?) and start the node again", strings.Join(dirs, " or "))}
	}
	return err
}

// noteCacheDamaged records a cache write SQLite called corrupt: such a
// page stays broken, so ReadHealth reports it until the restart that
// rebuilds the cache (the writer marks truth so that the start does).
func (h *health) noteCacheDamaged(err error, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.damaged == nil {
		h.damaged = fmt.Errorf("cache writes failing since %s: %w", now.UTC().Format(time.RFC3339), err)
	}
}

// explainRead adds what to do to a read error of the truth file that
// means it is damaged.
func explainRead(err error) error {
	if isCorrupt(err) {
		return fmt.Errorf("%w: the truth file is damaged: stop the node and restore truth.db from a backup (docs/operations.md, Restore)", err)
	}
	return err
}
