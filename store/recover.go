package store

import (
	"context"
	"database/sql/driver"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// queryOnce prepares, runs and finalizes a statement (boot-time reads).
func (rc *rawConn) queryOnce(query string, fn func([]driver.Value) error, args ...driver.Value) error {
	st, err := rc.c.(driver.ConnPrepareContext).PrepareContext(bg, query)
	if err != nil {
		return fmt.Errorf("prepare %q: %w", query, err)
	}
	defer st.Close()
	p := &rawStmt{st: st, sql: query}
	return p.query(fn, args...)
}

// execOnce runs a statement with arguments once.
func (rc *rawConn) execOnce(query string, args ...driver.Value) (int64, error) {
	st, err := rc.c.(driver.ConnPrepareContext).PrepareContext(bg, query)
	if err != nil {
		return 0, fmt.Errorf("prepare %q: %w", query, err)
	}
	defer st.Close()
	p := &rawStmt{st: st, sql: query}
	return p.exec(args...)
}

// loadState reads the writer's in-memory state from truth: counters,
// principals, groups, the trust list and the live vouches.
func (w *writer) loadState() error {
	s := w.s
	meta := map[string]string{}
	err := w.t.queryOnce(`SELECT name, value FROM meta`, func(d []driver.Value) error {
		meta[asString(d[0])] = asString(d[1])
		return nil
	})
	if err != nil {
		return err
	}
	w.lastSeq = parseInt(meta["last_seq"])
	w.rebuildSeq = parseInt(meta["rebuild_seq"])
	w.regroupPending = meta["regroup_pending"] == "1"
	w.policySaved = meta["trust_policy"]
	w.live = parseInt(meta["claims_live"])
	w.tomb = parseInt(meta["claims_tomb"])

	s.princ.reset()
	err = w.t.queryOnce(`SELECT pid, uid FROM principal`, func(d []driver.Value) error {
		s.princ.add(asString(d[1]), asInt(d[0]))
		return nil
	})
	if err != nil {
		return err
	}
	rids := map[string]string{}
	err = w.t.queryOnce(`SELECT cid, rid FROM cid_group`, func(d []driver.Value) error {
		rids[asString(d[0])] = asString(d[1])
		return nil
	})
	if err != nil {
		return err
	}
	s.groups.reset(rids)

	v := &trustView{mode: s.cfg.Trust, own: s.cfg.OwnUID, list: map[string]trustRow{}, vouches: map[string]map[string]struct{}{}}
	err = w.t.queryOnce(`SELECT uid, state, note, added FROM trust`, func(d []driver.Value) error {
		v.list[asString(d[0])] = trustRow{state: asString(d[1]), note: asString(d[2]), added: time.UnixMilli(asInt(d[3]))}
		return nil
	})
	if err != nil {
		return err
	}
	// Vouches live on libp2p-key cids ("bafz…"), under vouch/.
	err = w.t.queryOnce(`SELECT cid, key, pid, value, ts, id FROM claim
		WHERE cid >= 'bafz' AND cid < 'bafz~' AND key >= 'vouch/' AND key < 'vouch0'`, func(d []driver.Value) error {
		cid, key := asString(d[0]), asString(d[1])
		r := rowFromValue(asInt(d[2]), d[3], asInt(d[4]), asID(d[5]))
		c := Claim{UID: s.princ.uidOf(r.pid), CID: cid, Key: key}
		if uid, ok := vouchOf(&c, s.peerCID); ok && r.kind == KindText && r.val == "true" && s.checked(cid, key, &r) {
			v.setVouch(c.UID, uid, true)
		}
		return nil
	})
	if err != nil {
		return err
	}
	w.view = v.build()
	s.trust.Store(w.view)
	if err := w.loadAside(); err != nil {
		return err
	}
	w.publishDamage()
	return nil
}

// cacheState is what the cache says about itself at boot.
type cacheState struct {
	applied    int64
	hasApplied bool
	truthID    string
	mergeRules string
}

// loadCacheState reads the cache's counters and event bookkeeping.
func (w *writer) loadCacheState() (cacheState, error) {
	var cs cacheState
	meta := map[string]string{}
	err := w.c.queryOnce(`SELECT k, v FROM kv WHERE (k >= 'meta:' AND k < 'meta;') OR (k >= 'evhwm:' AND k < 'evhwm;') OR (k >= 'idx:count/' AND k < 'idx:count0')`,
		func(d []driver.Value) error {
			meta[asString(d[0])] = asString(d[1])
			return nil
		})
	if err != nil {
		return cs, err
	}
	cs.truthID = meta["meta:truth_id"]
	cs.mergeRules = meta["meta:merge_rules"]
	var applied string
	applied, cs.hasApplied = meta["meta:applied_seq"]
	cs.applied = parseInt(applied)
	w.records = parseInt(meta["idx:count/records"])
	if err := w.loadHidden(); err != nil {
		return cs, err
	}
	w.recordsSaved = -1
	if v, ok := meta["idx:count/records"]; ok {
		w.recordsSaved = parseInt(v)
	}

	w.schema, w.schemaDirty, w.schemaSaved = map[string]*[4]int64{}, map[string]bool{}, map[string][4]int64{}
	err = w.c.queryOnce(`SELECT k, v FROM kv WHERE k >= 'idx:schema/' AND k < 'idx:schema0'`, func(d []driver.Value) error {
		c := parseSchemaCounts(asString(d[1]))
		p := strings.TrimPrefix(asString(d[0]), "idx:schema/")
		w.schema[p] = &c
		w.schemaSaved[p] = c
		return nil
	})
	if err != nil {
		return cs, err
	}
	w.ev = map[Stream]*evState{}
	for _, st := range []Stream{StreamMeta, StreamFiles} {
		e := &evState{horizon: meta["meta:evtrim/"+string(st)], reset: meta["meta:evreset/"+string(st)]}
		e.setHWM(meta["evhwm:"+string(st)])
		err := w.c.queryOnce(`SELECT count(*) FROM kv WHERE k >= ? AND k < ?`, func(d []driver.Value) error {
			e.count = asInt(d[0])
			return nil
		}, evPrefix(st), evEnd(st))
		if err != nil {
			return cs, err
		}
		w.ev[st] = e
	}
	err = w.c.queryOnce(`SELECT count(*), coalesce(sum(size), 0) FROM local_file`, func(d []driver.Value) error {
		w.files, w.fileSize = asInt(d[0]), asInt(d[1])
		return nil
	})
	return cs, err
}

// reloadCacheCounters resets the cache counters after a failed cache
// transaction (the in-memory deltas of the rolled-back batch are void).
func (w *writer) reloadCacheCounters() {
	if _, err := w.loadCacheState(); err != nil {
		w.s.log.Error("reload cache counters", "err", err)
	}
}

// boot loads the state and brings the cache up to truth: nothing to do
// after a clean stop; a catch-up of the claims past applied_seq after an
// unclean one; a full rebuild when the cache is missing, belongs to
// another truth file, or truth changed in ways a catch-up cannot replay.
func (w *writer) boot(ctx context.Context) error {
	if err := w.loadState(); err != nil {
		return fmt.Errorf("load truth state: %w", err)
	}
	cs, err := w.loadCacheState()
	if err != nil {
		return fmt.Errorf("load cache state: %w", err)
	}
	ahead := cs.applied > w.lastSeq // before a regroup moves lastSeq
	regrouped := false
	if w.regroupPending || w.policySaved != w.trustPolicy() {
		if err := w.regroup(); err != nil {
			return fmt.Errorf("regroup for the trust policy: %w", err)
		}
		regrouped = !w.s.truthNew
	}
	switch {
	case !cs.hasApplied || cs.truthID != w.s.truthID:
		// A new cache for an existing truth holds no file events either:
		// cursors into the old one's files stream get a Gap, as meta
		// cursors do after any rebuild. A new node has no such cursors.
		var lost []Stream
		if !w.s.truthNew {
			lost = append(lost, StreamFiles)
		}
		err = w.rebuild(ctx, "the cache is new or belongs to another truth file", lost...)
	case ahead:
		err = w.rebuild(ctx, "the cache is ahead of truth (truth restored from a backup?)")
	case regrouped:
		err = w.rebuild(ctx, "the trust mode or own uid changed since truth was last open")
	case cs.mergeRules != mergeRules:
		err = w.rebuild(ctx, "the merge rules changed since the cache was built: each home now counts once per field")
	case cs.applied < w.lastSeq:
		err = w.catchUpFrom(ctx, cs.applied)
	}
	if err != nil {
		return err
	}
	h := w.s.hub
	h.mu.Lock()
	for st, e := range w.ev {
		h.last[st] = e.hwm
		h.horizon[st] = e.horizon
		h.reset[st] = e.reset
	}
	h.mu.Unlock()
	w.publishStats()
	return nil
}

// catchUp brings a cache that missed batches up to truth.
func (w *writer) catchUp() error {
	dest := make([]driver.Value, 1)
	ok, err := w.cGet.one(dest, "meta:applied_seq")
	if err != nil {
		return err
	}
	if !ok {
		return w.rebuild(context.Background(), "applied_seq is missing")
	}
	return w.catchUpFrom(context.Background(), parseInt(asString(dest[0])))
}

// catchUpFrom re-applies the truth claims written after applied: every
// record they touch is recomputed from truth, with events. A link or any
// other change it cannot replay (rebuild_seq) makes it a full rebuild.
func (w *writer) catchUpFrom(ctx context.Context, applied int64) error {
	if applied >= w.lastSeq {
		w.cacheBehind = false
		return nil
	}
	if w.rebuildSeq > applied {
		return w.rebuild(ctx, "groups or trust changed after the cache's last commit")
	}
	start := time.Now()
	b := newBatch(w)
	link := false
	// A claim past applied may replace a row whose claim_by_pid entry the
	// cache already holds (under its first seq): the entry is then added
	// twice, which readers of claim_by_pid tolerate (trustDelta's sync ops are
	// idempotent).
	err := w.t.queryOnce(`SELECT cid, key, pid, seq FROM claim WHERE seq > ?`, func(d []driver.Value) error {
		cid, key := asString(d[0]), asString(d[1])
		if IsLinkKey(key) {
			link = true
		}
		b.cbp = append(b.cbp, cbpRow{asInt(d[2]), asInt(d[3]), cid, key})
		if rid, ok := w.s.groups.ridOf(cid); ok {
			b.full[rid] = true
		}
		return nil
	}, applied)
	if err != nil {
		return err
	}
	if link {
		return w.rebuild(ctx, "a link claim is past the cache's last commit")
	}
	if err := w.c.exec("BEGIN IMMEDIATE"); err != nil {
		return err
	}
	err = func() error {
		if err := w.insertCBP(b.cbp); err != nil {
			return err
		}
		for _, rid := range sortedKeys(b.full) {
			if err := w.recompute(b, rid, true); err != nil {
				return err
			}
		}
		return w.finishCache(b)
	}()
	if err != nil {
		w.rollbackCache()
		w.reloadCacheCounters()
		return fmt.Errorf("catch up: %w", err)
	}
	w.s.hub.publish(b.events)
	w.s.log.Info("cache caught up with truth", "claims", len(b.cbp), "records", len(b.full), "took", time.Since(start))
	return nil
}

// rebuild recomputes the whole cache from truth. It writes no per-key
// events: cursors issued before it get a Gap. Local files and the file
// event stream are kept (they are not derived from truth).
//
// At boot nobody reads yet, so it commits in bounded chunks. After boot
// (a catch-up from the writer loop) it is one transaction, so readers keep
// the old cache until the new one is complete, and it then ends the live
// subscriptions of the streams it rewrote: they got no per-key events, so
// their consumers must reconnect with their last id into the gap.
func (w *writer) rebuild(ctx context.Context, why string, lost ...Stream) (err error) {
	start := time.Now()
	serving := w.serving
	w.s.log.Info("rebuilding the cache from truth", "why", why, "at_runtime", serving)
	b := newBatch(w)
	inTx := false
	defer func() {
		if err != nil {
			if inTx {
				w.rollbackCache()
			}
			w.cacheBehind = true
			err = fmt.Errorf("rebuild cache: %w", err)
		}
	}()
	if err := w.groupLocalFiles(); err != nil {
		return err
	}
	// The truth file is attached read-only to copy claim_by_pid in one
	// statement; ATTACH is not allowed inside a transaction.
	u := url.URL{Scheme: "file", Path: w.truthPath, RawQuery: "mode=ro"}
	if _, err := w.c.execOnce(`ATTACH DATABASE ? AS truth`, u.String()); err != nil {
		return err
	}
	defer func() {
		// A failed rebuild's transaction ends first: DETACH is refused
		// inside one, and the next rebuild's ATTACH would then be too.
		if inTx {
			w.rollbackCache()
			inTx = false
		}
		_, _ = w.c.execOnce(`DETACH DATABASE truth`)
	}()
	// Building kv_field_v sorts every field row, and the sorter's spill
	// files follow temp_store: in memory (the store's setting) they were
	// ~70 MB of RSS at a million claims, past the node's 300 MB. Not
	// settable inside a transaction, so around the whole rebuild.
	if err := w.c.exec("PRAGMA temp_store = FILE"); err != nil {
		return err
	}
	defer func() { _ = w.c.exec("PRAGMA temp_store = MEMORY") }()
	if serving {
		w.s.rebuilding.start() // replays wait for the new cache (AwaitRebuild)
		defer w.s.rebuilding.end()
		if w.s.duringRebuild != nil {
			w.s.duringRebuild()
		}
	}
	if err := w.c.exec("BEGIN IMMEDIATE"); err != nil {
		return err
	}
	inTx = true
	// What consumers may hold from the old cache: its keys, and the keys
	// of the dels still in its meta stream (this writes no per-key events).
	if err := w.keepOldKeys(); err != nil {
		return err
	}
	if err := w.harvestGone("", w.ev[StreamMeta].hwm); err != nil {
		return err
	}
	for _, q := range []string{
		`DELETE FROM kv WHERE (k >= 'file:' AND k < 'file;') OR (k >= 'cid:' AND k < 'cid;') OR (k >= 'idx:' AND k < 'idx;')
			OR (k >= 'ev:meta:events/' AND k < 'ev:meta:events0') OR k = 'meta:applied_seq' OR k = 'meta:truth_id'`,
		`DELETE FROM fts`,
		`DELETE FROM claim_by_pid`,
		`DROP INDEX IF EXISTS kv_field_v`,
		`INSERT INTO claim_by_pid(pid, seq, cid, key) SELECT pid, seq, cid, key FROM truth.claim`,
	} {
		if err := w.c.exec(q); err != nil {
			return err
		}
	}
	if !serving {
		if err := w.c.exec("COMMIT"); err != nil {
			return err
		}
		inTx = false
	}
	w.records = 0
	clear(w.hidden)
	clear(w.schema)
	w.forgetSavedCounters()
	w.ev[StreamMeta].count = 0

	rids := w.s.groups.rids()
	const chunk = 2000
	for i, rid := range rids {
		if !inTx {
			if err := w.c.exec("BEGIN IMMEDIATE"); err != nil {
				return err
			}
			inTx = true
		}
		if err := w.writeRecord(rid); err != nil {
			return err
		}
		if !serving && (i+1)%chunk == 0 {
			if err := w.c.exec("COMMIT"); err != nil {
				return err
			}
			inTx = false
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	if !inTx {
		if err := w.c.exec("BEGIN IMMEDIATE"); err != nil {
			return err
		}
		inTx = true
	}
	if err := w.c.exec(kvFieldIndexDDL); err != nil {
		return err
	}
	for p := range w.schema {
		w.schemaDirty[p] = true
	}
	for _, st := range append([]Stream{StreamMeta}, lost...) {
		if err := w.markGap(b, st); err != nil {
			return err
		}
	}
	if err := w.recordVanished(w.ev[StreamMeta].reset); err != nil {
		return err
	}
	if slices.Contains(lost, StreamFiles) {
		// As after a watcher reset: a consumer's file list may hold paths
		// removed while the old cache's rows were lost, and no delete will
		// ever come for them. reset tells it to drop the list; the
		// watcher's scan then adds what is on disk.
		if err := w.emit(b, StreamFiles, "reset", fileEventData("reset", "", "", "", "", b.nowMS)); err != nil {
			return err
		}
	}
	if _, err := w.cPut.exec("meta:truth_id", w.s.truthID); err != nil {
		return err
	}
	if _, err := w.cPut.exec("meta:merge_rules", mergeRules); err != nil {
		return err
	}
	// Every record is merged now: a trust change's queue is done, and
	// applied_seq is truth's.
	clear(w.remerge.due)
	w.remerge.queue = w.remerge.queue[:0]
	w.s.met.remerge.Set(0)
	if err := w.finishCache(b); err != nil {
		return err
	}
	if w.check != nil {
		w.check = nil // every row was written again
		w.publishCheck()
	}
	inTx = false
	if serving {
		for _, st := range append([]Stream{StreamMeta}, lost...) {
			w.s.hub.endLive(st)
		}
	}
	w.s.log.Info("cache rebuilt", "records", len(rids), "took", time.Since(start))
	return nil
}

// groupLocalFiles gives every local file's cid a group in truth, as
// fileGroups does when the file is added. Every write path keeps that
// invariant except two that break it in truth alone: a Clear stopped
// between its truth and cache commits (local_file survives), and truth
// restored from a backup older than the file. The watcher skips unchanged
// files, so without this the file would never get a record again.
func (w *writer) groupLocalFiles() error {
	var missing []string
	err := w.c.queryOnce(`SELECT DISTINCT midhash FROM local_file ORDER BY midhash`, func(d []driver.Value) error {
		if cid := asString(d[0]); !w.hasGroup(cid) {
			missing = append(missing, cid)
		}
		return nil
	})
	if err != nil || len(missing) == 0 {
		return err
	}
	if err := w.setTruthSync(false); err != nil {
		return err
	}
	if err := w.t.exec("BEGIN IMMEDIATE"); err != nil {
		return err
	}
	rids := make([]string, len(missing))
	seq := w.lastSeq + 1 // a group change: a catch-up could not replay it
	err = func() error {
		for i, cid := range missing {
			rids[i] = NewRID()
			if _, err := w.tSetGroup.exec(cid, rids[i]); err != nil {
				return err
			}
		}
		for _, m := range []string{"last_seq", "rebuild_seq"} {
			if _, err := w.tSetMeta.exec(m, strconv.FormatInt(seq, 10)); err != nil {
				return err
			}
		}
		return w.t.exec("COMMIT")
	}()
	if err != nil {
		_ = w.t.exec("ROLLBACK")
		return fmt.Errorf("groups for local files: %w", err)
	}
	w.truthUnsynced = false
	w.lastSeq, w.rebuildSeq = seq, seq
	for i, cid := range missing {
		w.s.groups.add(cid, rids[i])
	}
	w.s.log.Warn("local files had no group in truth (an interrupted clear, or truth restored from a backup): groups made again",
		"files", len(missing))
	return nil
}

func (w *writer) hasGroup(cid string) bool {
	_, ok := w.s.groups.ridOf(cid)
	return ok
}

// writeRecord writes a record's rows during a rebuild: no diff, no events.
func (w *writer) writeRecord(rid string) error {
	fields, described, err := w.computeRecord(rid)
	if err != nil {
		return err
	}
	if !described {
		w.hidden[rid] = true
		_, err := w.cPut.exec("idx:hidden/"+rid, "1")
		return err
	}
	if _, err := w.cPut.exec("idx:roots/"+rid, "1"); err != nil {
		return err
	}
	w.records++
	for _, cid := range w.s.groups.cidsOf(rid) {
		if _, err := w.cPut.exec("cid:"+cid, rid); err != nil {
			return err
		}
	}
	for _, k := range sortedKeys(fields) {
		if _, err := w.cPut.exec(fieldKey(rid, k), fields[k]); err != nil {
			return err
		}
		w.schemaAdd(k, fields[k], 1)
	}
	rowid, err := w.cFTSIns.execID(rid, haystack(rid, fields))
	if err != nil {
		return err
	}
	_, err = w.cPut.exec("idx:fts/"+rid, strconv.FormatInt(rowid, 10))
	return err
}

// runClear wipes both databases except the trust list, and makes every
// cursor get a Gap.
func (w *writer) runClear(r *request) {
	s := w.s
	err := func() error {
		if err := w.setTruthSync(false); err != nil {
			return err
		}
		if err := w.t.exec("BEGIN IMMEDIATE"); err != nil {
			return err
		}
		n, err := w.t.execOnce(`DELETE FROM claim`)
		if err != nil {
			return err
		}
		for _, q := range []string{`DELETE FROM cid_group`, `DELETE FROM group_edge`, `DELETE FROM principal`, `DELETE FROM quarantine`} {
			if err := w.t.exec(q); err != nil {
				return err
			}
		}
		w.lastSeq++
		w.rebuildSeq = w.lastSeq
		w.live, w.tomb = 0, 0
		for _, m := range [][2]string{{"last_seq", ""}, {"rebuild_seq", ""}, {"claims_live", "0"}, {"claims_tomb", "0"}} {
			if m[1] == "" {
				m[1] = strconv.FormatInt(w.lastSeq, 10)
			}
			if _, err := w.tSetMeta.exec(m[0], m[1]); err != nil {
				return err
			}
		}
		if err := w.t.exec("COMMIT"); err != nil {
			return err
		}
		w.truthUnsynced = false
		r.cleared = int(n)
		return nil
	}()
	if err != nil {
		_ = w.t.exec("ROLLBACK")
		err = w.failed(true, err)
		if lerr := w.loadState(); lerr != nil {
			s.log.Error("reload state", "err", lerr)
		}
		reply([]*request{r}, fmt.Errorf("%w: clear: %v", ErrUnavailable, err))
		return
	}
	old := w.view
	s.groups.reset(map[string]string{})
	s.princ.reset()
	w.dmg.aside, w.dmg.unmoved = map[damageRef]asideRow{}, map[damageRef]bool{}
	w.publishDamage()
	v := old.clone()
	v.vouches = map[string]map[string]struct{}{}
	w.view = v.build()
	s.trust.Store(w.view)
	b := newBatch(w)
	b.sync = []syncOp{{reset: true}}
	w.syncPending = nil // changes of claims that are gone now
	w.applySyncOps(b)

	endLive := false
	err = func() error {
		if err := w.c.exec("BEGIN IMMEDIATE"); err != nil {
			return err
		}
		// Consumers hold the merged keys: each gets a del event, as
		// upstream's keyspace notifications sent for its wiped keys. More
		// than the stream retains could not be replayed anyway: then live
		// streams end instead and reconnect into the gap.
		keys, err := w.mergedKeys(w.s.cfg.EventRetention)
		if err != nil {
			return err
		}
		endLive = keys == nil
		if err := w.keepOldKeys(); err != nil {
			return err
		}
		if err := w.harvestGone("", w.ev[StreamMeta].hwm); err != nil {
			return err
		}
		for _, q := range []string{
			`DELETE FROM kv WHERE NOT (k >= 'meta:' AND k < 'meta;') AND NOT (k >= 'evhwm:' AND k < 'evhwm;')
				AND NOT (k >= '` + goneKVPrefix + `' AND k < '` + goneKVEnd + `')`,
			`DELETE FROM fts`, `DELETE FROM claim_by_pid`, `DELETE FROM local_file`,
		} {
			if err := w.c.exec(q); err != nil {
				return err
			}
		}
		w.records, w.files, w.fileSize = 0, 0, 0
		clear(w.hidden)
		w.forgetSavedCounters()
		for p := range w.schema {
			w.schemaDirty[p] = true
		}
		clear(w.schema)
		for _, st := range []Stream{StreamMeta, StreamFiles} {
			w.ev[st].count = 0
			if err := w.markGap(b, st); err != nil {
				return err
			}
		}
		if err := w.recordVanished(w.ev[StreamMeta].reset); err != nil {
			return err
		}
		for _, k := range keys {
			if err := w.emitMeta(b, "del", k); err != nil {
				return err
			}
		}
		// The files stream starts over, as after a watcher reset: consumers
		// drop their file lists, and the watcher adds what is on disk.
		if err := w.emit(b, StreamFiles, "reset", fileEventData("reset", "", "", "", "", b.nowMS)); err != nil {
			return err
		}
		return w.finishCache(b)
	}()
	if err != nil {
		w.rollbackCache()
		w.cacheBehind = true
		w.reloadCacheCounters()
		reply([]*request{r}, fmt.Errorf("%w: clear: %v", ErrUnavailable, w.failed(false, err)))
		return
	}
	w.committed()
	s.hub.publish(b.events)
	if endLive {
		s.hub.endLive(StreamMeta)
	}
	w.publishStats()
	if len(old.vouches) > 0 {
		s.signalTrust()
	}
	reply([]*request{r}, nil)
}

// mergedKeys lists the merged keys (file:<rid>/<field>) in the cache, or
// nil when there are more than limit.
func (w *writer) mergedKeys(limit int) ([]string, error) {
	keys := []string{}
	err := w.c.queryOnce(`SELECT k FROM kv WHERE k >= 'file:' AND k < 'file;' ORDER BY k LIMIT ?`, func(d []driver.Value) error {
		keys = append(keys, asString(d[0]))
		return nil
	}, int64(limit)+1)
	if err != nil || len(keys) > limit {
		return nil, err
	}
	return keys, nil
}

// endLive ends every live subscription of a stream as too slow, so that
// its consumer reconnects with its last id and gets the stream's Gap
// (pumped ones end by the horizon already).
func (h *hub) endLive(st Stream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs[st] {
		h.dropLocked(sub, ErrSlowConsumer)
	}
}
