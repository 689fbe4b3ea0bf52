package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"time"
)

// Cache damage found on read. The cache is derived, so a read that finds it
// disagreeing with truth can have it rebuilt. A read that finds no record
// for a cid or rid that truth's groups hold, where the cache keeps neither
// the record nor its hidden mark (or a cid row naming another record),
// means rows of the cache were lost or changed (a damaged page, a hand
// edit): the reader has the writer merge that record again from truth
// (reqRepair) and reads once more. When the record did differ, the damage
// is unlikely to be alone: the writer then checks every record the same
// way, in chunks between writes (the re-merge queue of remerge.go: a
// record that differs gets its rows and events, one that agrees costs
// reads only), then removes index rows that name no record and recounts
// the records. IntegrityHealth says so while it runs. A stop before it
// ends makes the next start rebuild the cache (the queue's floor).
//
// Not covered: the search rows (FTS) and the filter index of a damaged
// file, and a page SQLite itself finds corrupt, which fails the reads that
// meet it (ReadHealth: delete cache.db, it is rebuilt at the next start).

// cacheCheck is a check of every record under way.
type cacheCheck struct {
	since   time.Time
	first   string // the record found first
	total   int    // records to check
	changed int    // merged values the check wrote back (events)
}

// cacheProgress is what health shows of a check.
type cacheProgress struct {
	since       time.Time
	first       string
	total, left int
}

// cacheLost is called by a read of h that found no record (err
// ErrNotFound), or found the record gotRID for a cid that truth's groups
// put in another one. It reports whether the writer found the cache
// disagreeing with truth and rebuilt the record, so the read is worth one
// more try. fields: the read wanted the record's rows (a record always has
// some), not only its cid or index row.
func (s *Store) cacheLost(ctx context.Context, h, gotRID string, err error, fields bool) bool {
	rid, ok := "", false
	if IsRID(h) {
		rid, ok = h, len(s.groups.cidsOf(h)) > 0
	} else {
		rid, ok = s.groups.ridOf(h)
	}
	switch {
	case !ok:
		return false
	case err == nil:
		if gotRID == "" || gotRID == rid {
			return false
		}
	case !errors.Is(err, ErrNotFound):
		return false
	default:
		if !s.recordMissing(ctx, h, rid, fields) {
			return false
		}
	}
	r := &request{kind: reqRepair, rid: rid}
	if err := s.do(ctx, r); err != nil {
		return false
	}
	return r.repaired
}

// recordMissing reports whether the cache lacks what it must hold for the
// record rid that h (the rid or a cid of it) names.
func (s *Store) recordMissing(ctx context.Context, h, rid string, fields bool) bool {
	qctx, err := quick(ctx)
	if err != nil {
		return false
	}
	var cidRID sql.NullString
	var roots, hidden bool
	err = s.cacheR.QueryRowContext(qctx, `SELECT (SELECT v FROM kv WHERE k = ?), EXISTS(SELECT 1 FROM kv WHERE k = ?), EXISTS(SELECT 1 FROM kv WHERE k = ?)`,
		"cid:"+h, "idx:roots/"+rid, "idx:hidden/"+rid).Scan(&cidRID, &roots, &hidden)
	switch {
	case err != nil:
		return false
	case !roots:
		return !hidden // a hidden group has no record to read
	case !IsRID(h) && cidRID.String != rid:
		return true
	}
	return fields
}

// repairRecord merges a record again from truth when the cache disagrees
// with it (a reader found it lost), and then has every record checked.
func (w *writer) repairRecord(b *batch, r *request) error {
	rid := r.rid
	if len(w.s.groups.cidsOf(rid)) == 0 {
		return nil
	}
	differs, err := w.cacheDiffers(rid)
	if err != nil || !differs {
		return err
	}
	r.repaired = true
	w.s.met.cacheRepairs.Inc()
	if err := w.rewriteRecord(b, rid); err != nil {
		return err
	}
	w.startCacheCheck(rid)
	return nil
}

// rewriteRecord merges a record again from truth and reads it back: a
// record that still differs from what was just written sits on a damaged
// b-tree (a key out of order ends a scan early, or hides a row from its
// own upsert), which only a new cache file mends: the next start makes one.
func (w *writer) rewriteRecord(b *batch, rid string) error {
	if err := w.recompute(b, rid, true); err != nil {
		return err
	}
	if w.hidden[rid] {
		if _, err := w.cPut.exec("idx:hidden/"+rid, "1"); err != nil {
			return err
		}
	}
	return w.readBack(rid)
}

// readBack checks a record just written again (see rewriteRecord).
func (w *writer) readBack(rid string) error {
	still, err := w.cacheDiffers(rid)
	if err != nil || !still {
		return err
	}
	w.markCacheDamaged(fmt.Errorf("record %s of %s reads differently from what was just written to it: its b-tree is damaged: restart the node: the start deletes it and rebuilds it from truth",
		rid, filepath.Base(w.s.cfg.CachePath)))
	return nil
}

// cacheDiffers reports whether the cache's rows of a record are not what
// truth makes them: its merged values, its index row, its cid rows, or
// its hidden mark. A record of which truth has a damaged row is not the
// cache's fault: that row is being set aside, and the record merged again
// without it (damage.go); it counts as agreeing.
func (w *writer) cacheDiffers(rid string) (bool, error) {
	seen := w.dmg.seen
	want, described, err := w.computeRecord(rid)
	if err != nil || w.dmg.seen != seen {
		return false, err
	}
	dest := make([]driver.Value, 1)
	roots, err := w.cGet.one(dest, "idx:roots/"+rid)
	if err != nil {
		return false, err
	}
	hidden, err := w.cGet.one(dest, "idx:hidden/"+rid)
	if err != nil {
		return false, err
	}
	if !described {
		return roots || !hidden, nil
	}
	if !roots || hidden {
		return true, nil
	}
	for _, cid := range w.s.groups.cidsOf(rid) {
		ok, err := w.cGet.one(dest, "cid:"+cid)
		if err != nil {
			return false, err
		}
		if !ok || asString(dest[0]) != rid {
			return true, nil
		}
	}
	have, err := w.fields(rid)
	if err != nil {
		return false, err
	}
	return !maps.Equal(have, want), nil
}

// startCacheCheck queues every record for a check (see above), unless one
// is under way.
func (w *writer) startCacheCheck(rid string) {
	if w.check != nil {
		return
	}
	q := &w.remerge
	if !q.pending() {
		q.floor = w.rebuildSeq - 1 // a stop before the check ends rebuilds the cache
		q.start = time.Now()
		q.due = map[string]bool{}
		q.queue = q.queue[:0]
	}
	rids := w.s.groups.rids()
	for _, r := range rids {
		if r != rid && !q.due[r] {
			q.due[r] = true
			q.queue = append(q.queue, r)
		}
	}
	w.check = &cacheCheck{since: time.Now(), first: rid, total: len(rids)} // ended by the writer loop once the queue is empty
	w.s.met.remerge.Set(float64(len(q.due)))
	w.publishCheck()
	w.s.log.Warn("the cache disagreed with truth on a record (damage on disk?): it was merged again from truth; checking every record, between writes",
		"record", rid, "records", len(rids))
}

// abandonCheck forgets a check whose batch failed (its records, queued,
// are still re-merged; a failure there ends the queue).
func (w *writer) abandonCheck() {
	if w.check != nil {
		w.check = nil
		w.publishCheck()
	}
}

// checkChunk counts what a chunk of the check wrote back.
func (w *writer) checkChunk(b *batch) {
	if w.check != nil {
		w.check.changed += len(b.events)
		w.publishCheck()
	}
}

// finishCacheCheck ends a check whose queue drained (the writer loop calls
// it): index rows that name no record go, and the records are counted
// again.
func (w *writer) finishCacheCheck() {
	c := w.check
	if c == nil {
		return
	}
	w.check = nil
	defer w.publishCheck()
	err := func() error {
		if err := w.c.exec("BEGIN IMMEDIATE"); err != nil {
			return err
		}
		swept, err := w.sweepIndex()
		if err != nil {
			return err
		}
		n := int64(0)
		err = w.c.queryOnce(`SELECT count(*) FROM kv WHERE k >= 'idx:roots/' AND k < 'idx:roots0'`, func(d []driver.Value) error {
			n = asInt(d[0])
			return nil
		})
		if err != nil {
			return err
		}
		w.records = n
		w.s.log.Info("cache check done: every record agrees with truth again",
			"records", c.total, "values_written_back", c.changed, "index_rows_removed", swept, "took", time.Since(c.since).Round(time.Millisecond))
		return w.finishCache(newBatch(w))
	}()
	if err != nil {
		w.rollbackCache()
		w.cacheBehind = true
		w.reloadCacheCounters()
		w.s.log.Error("cache check: its last step failed; the cache is caught up with the next write", "err", w.failed(false, err))
		return
	}
	w.committed()
	w.publishStats()
}

// sweepIndex deletes record index, hidden and cid rows that name no group
// of truth, or another group than truth's (left over from damaged keys).
func (w *writer) sweepIndex() (int, error) {
	var stale []string
	g := w.s.groups
	err := w.c.queryOnce(`SELECT k, v FROM kv WHERE (k >= 'idx:roots/' AND k < 'idx:roots0') OR (k >= 'idx:hidden/' AND k < 'idx:hidden0') OR (k >= 'cid:' AND k < 'cid;')`,
		func(d []driver.Value) error {
			k := asString(d[0])
			switch {
			case strings.HasPrefix(k, "cid:"):
				if rid, ok := g.ridOf(k[len("cid:"):]); !ok || rid != asString(d[1]) || w.hidden[rid] {
					stale = append(stale, k)
				}
			case strings.HasPrefix(k, "idx:roots/"):
				if rid := k[len("idx:roots/"):]; len(g.cidsOf(rid)) == 0 || w.hidden[rid] {
					stale = append(stale, k)
				}
			default:
				if rid := k[len("idx:hidden/"):]; !w.hidden[rid] {
					stale = append(stale, k)
				}
			}
			return nil
		})
	if err != nil {
		return 0, err
	}
	for _, k := range stale {
		if _, err := w.cDel.exec(k); err != nil {
			return 0, err
		}
	}
	return len(stale), nil
}

// publishCheck copies the check's progress for health.
func (w *writer) publishCheck() {
	d := &w.s.damage
	d.mu.Lock()
	defer d.mu.Unlock()
	if w.check == nil {
		d.check = cacheProgress{}
		return
	}
	d.check = cacheProgress{since: w.check.since, first: w.check.first, total: w.check.total, left: len(w.remerge.due)}
}

// cacheRepairHealth is nil unless a cache check runs.
func (s *Store) cacheRepairHealth() error {
	d := &s.damage
	d.mu.Lock()
	c := d.check
	d.mu.Unlock()
	if c.since.IsZero() {
		return nil
	}
	return fmt.Errorf("%s disagreed with truth on record %s (found %s: damage on disk?); it was merged again from truth, and every record is being checked the same way, %d of %d left; nothing to do (should it not end, delete %s with the node stopped: it is rebuilt at the next start)",
		filepath.Base(s.cfg.CachePath), c.first, c.since.UTC().Format(time.RFC3339), c.left, c.total, filepath.Base(s.cfg.CachePath))
}

// The cache's share of the scrub. A read finds only what went missing; a
// merged value changed on disk reads like any other. So the writer also
// compares a few records at a time with truth between requests
// (cacheDiffers), paced like the scrub (every record within
// ScrubConfig.Period, 1 to MaxRate records a second), and repairs one that
// differs as a read would have (then every record is checked). It waits
// while a re-merge queue runs or the cache is behind: records then differ
// on purpose.
type cacheScrub struct {
	timer *time.Timer
	next  string // the rid after which the next comparison starts
}

// c is the timer's channel (nil, never ready, when the scrub is off).
func (c *cacheScrub) c() <-chan time.Time {
	if c.timer == nil {
		return nil
	}
	return c.timer.C
}

// startCacheScrub arms the writer's cache comparison.
func (w *writer) startCacheScrub() {
	if cfg := w.s.cfg.Scrub; cfg.Period > 0 {
		w.cscrub.timer = time.NewTimer(cfg.Delay)
	}
}

// scrubCacheStep compares the next records with truth and arms the timer
// for the next step.
func (w *writer) scrubCacheStep() {
	wait := scrubTick
	defer func() { w.cscrub.timer.Reset(wait) }()
	if w.remerge.pending() || w.cacheBehind || w.check != nil {
		return
	}
	cfg := w.s.cfg.Scrub
	rate := min(cfg.MaxRate, max(scrubMinRate, float64(w.records+int64(len(w.hidden)))/cfg.Period.Seconds()))
	n := min(scrubPage/4, max(1, int(rate*scrubTick.Seconds())))
	rids := w.s.groups.ridsAfter(w.cscrub.next, n)
	checked := 0
	for _, rid := range rids {
		w.cscrub.next = rid
		checked++
		differs, err := w.cacheDiffers(rid)
		if err != nil {
			if isCorrupt(err) {
				w.markCacheDamaged(explain(false, w.s.cfg.CachePath, err))
			}
			w.s.log.Error("cache scrub: reading failed; trying again later", "err", err)
			wait = scrubRetry
			return
		}
		if differs {
			w.run([]*request{{kind: reqRepair, rid: rid, done: make(chan struct{})}})
			break
		}
	}
	w.s.met.scrubRecords.Add(float64(checked))
	if checked > 0 {
		wait = time.Duration(float64(checked) / rate * float64(time.Second))
	}
	if len(rids) < n {
		w.cscrub.next = "" // a pass done: the next starts over
		wait = max(wait, scrubTick)
	}
}
