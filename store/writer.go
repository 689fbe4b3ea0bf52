package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"slices"
	"time"
)

type reqKind uint8

const (
	reqSubmit reqKind = iota
	reqTrust
	reqFiles
	reqKVPut
	reqKVDel
	reqClear
	reqDamage // settle the rows reported damaged (damage.go)
	reqRepair // rebuild a record the cache lost (cacherepair.go)
)

// request is one unit of work for the writer. The writer fills the answer
// fields and closes done.
type request struct {
	kind reqKind

	// reqSubmit
	origin  Origin
	claims  []Claim
	ids     []ID
	results []Result          // prefilled for claims refused before queueing
	recheck []bool            // verification skipped as "already stored": verify if it would be stored
	rids    map[string]string // SubmitOptions.RIDs

	// reqTrust
	uid, note, state string
	at               time.Time // the row's change time; zero: now

	// reqFiles
	files       []FileUpdate
	fileResults []FileResult

	// reqKVPut, reqKVDel
	key, value string
	existed    bool

	// reqClear
	cleared int

	// reqRepair: the record, and whether the cache disagreed with truth
	rid      string
	repaired bool

	err  error
	done chan struct{}
}

func (r *request) weight() int {
	switch r.kind {
	case reqSubmit:
		return len(r.claims)
	case reqFiles:
		return len(r.files)
	}
	return 1
}

// writer owns both write connections. Everything in it is touched only by
// the writer goroutine.
type writer struct {
	s         *Store
	t, c      rawConn
	truthPath string

	view *trustView // the writer's current trust view (published in s.trust)

	lastSeq, rebuildSeq int64
	regroupPending      bool   // truth got group_edge from an older layout: split the groups of untrusted signers at boot
	policySaved         string // the trust mode and own uid truth was last opened with (meta trust_policy)
	live, tomb          int64
	records             int64
	hidden              map[string]bool // groups that are not records now (hidden.go)
	files, fileSize     int64
	schema              map[string]*[4]int64 // path → counts by type (string, int, float, bool)
	schemaDirty         map[string]bool
	schemaSaved         map[string][4]int64 // the counter rows as the cache holds them (empty: unknown)
	recordsSaved        int64               // idx:count/records as the cache holds it (-1: unknown)
	cacheBehind         bool                // the cache missed a batch; catch up before the next
	serving             bool                // booted: readers and subscribers are attached (see rebuild)
	syncPending         []syncOp            // sync changes of truth commits the cache has yet to apply
	remerge             remergeQueue        // records a trust change has yet to re-merge (remerge.go)
	dmg                 writerDamage        // the quarantine and damaged rows (damage.go)
	check               *cacheCheck         // a cache repair under way (cacherepair.go)
	cscrub              cacheScrub          // the scrub's comparison of records with truth (cacherepair.go)

	ev map[Stream]*evState

	// kvRows are kv upserts (key, value) of the cache transaction not yet
	// written: merged values and event rows go in multi-row statements.
	// Every statement that reads or deletes kv rows writes them first (its
	// before hook), so the transaction reads what it wrote, in order; the
	// commit follows finishEvents, which writes them; a rollback drops
	// them (rollbackCache). Only merged values (file:) and event rows (ev:)
	// are queued; the single cPut writes other keys, so the order between
	// the two does not matter.
	kvRows []driver.Value

	truthNormal   bool // the truth connection runs synchronous=NORMAL now (see setTruthSync)
	truthUnsynced bool // a NORMAL commit since the last FULL one: its WAL frames await an fsync

	// truth statements
	tSelRows, tSelRow, tSelCid, tUpsert, tInsPrincipal, tSetGroup, tSetMeta, tSetCounts, tSetTrust *rawStmt
	tSelSig, tAddEdge, tEdgesOf, tEdgesBy, tUpsertN, tSelItem                                      *rawStmt
	tSelFull, tSetID, tAside, tDelClaim, tUnaside                                                  *rawStmt
	// cache statements
	cGet, cPut, cPutN, cDel, cRange, cDelRange, cCBP, cCBPN, cSelCBP, cFTSIns, cFTSUpd, cFTSDel, cLocalBy, cLocalGet, cLocalPut, cLocalDel, cHay, cEvCut *rawStmt
}

// runWriter is the writer goroutine: it takes both connections for its
// whole life, boots (load state, recover the cache), reports to Open, then
// serves requests until the store closes.
func (s *Store) runWriter(openCtx context.Context, tconn, cconn *sql.Conn, truthPath string, ready chan<- error) {
	defer s.wg.Done()
	defer close(s.writerDone)
	defer cconn.Close()
	defer tconn.Close()
	booted := false
	err := tconn.Raw(func(tdc any) error {
		return cconn.Raw(func(cdc any) error {
			w := &writer{s: s, t: rawConn{c: tdc.(driver.Conn)}, c: rawConn{c: cdc.(driver.Conn)}, truthPath: truthPath, hidden: map[string]bool{}}
			defer w.t.closeStmts()
			defer w.c.closeStmts()
			if err := w.prepare(); err != nil {
				return err
			}
			if err := w.boot(openCtx); err != nil {
				return err
			}
			booted = true
			w.serving = true
			ready <- nil
			w.loop()
			return nil
		})
	})
	if !booted {
		if err == nil {
			err = ErrClosed
		}
		ready <- err
	} else if err != nil {
		s.log.Error("writer stopped", "err", err)
	}
}

func (w *writer) prepare() error {
	type ps struct {
		dst  **rawStmt
		conn *rawConn
		sql  string
	}
	list := []ps{
		{&w.tSelRows, &w.t, `SELECT pid, value, ts, id FROM claim WHERE cid = ? AND key = ?`},
		{&w.tSelRow, &w.t, `SELECT value, ts, id FROM claim WHERE cid = ? AND key = ? AND pid = ?`},
		{&w.tSelItem, &w.t, `SELECT ts, id FROM claim WHERE cid = ? AND key = ? AND pid = ?`},
		{&w.tSelCid, &w.t, `SELECT key, pid, value, ts, id FROM claim WHERE cid = ?`},
		{&w.tUpsert, &w.t, `INSERT INTO claim(cid, key, pid, value, ts, sig, id, seq) VALUES(?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT(cid, key, pid) DO UPDATE SET value = excluded.value, ts = excluded.ts, sig = excluded.sig, id = excluded.id, seq = excluded.seq`},
		{&w.tUpsertN, &w.t, `INSERT INTO claim(cid, key, pid, value, ts, sig, id, seq) VALUES` + multiValues(rowsPerStmt, 8) + `
			ON CONFLICT(cid, key, pid) DO UPDATE SET value = excluded.value, ts = excluded.ts, sig = excluded.sig, id = excluded.id, seq = excluded.seq`},
		{&w.tInsPrincipal, &w.t, `INSERT INTO principal(uid) VALUES(?)`},
		{&w.tSetGroup, &w.t, `INSERT INTO cid_group(cid, rid) VALUES(?, ?) ON CONFLICT(cid) DO UPDATE SET rid = excluded.rid`},
		{&w.tSelSig, &w.t, `SELECT sig FROM claim WHERE cid = ? AND key = ? AND pid = ?`},
		{&w.tSelFull, &w.t, `SELECT value, ts, id, sig FROM claim WHERE cid = ? AND key = ? AND pid = ?`},
		{&w.tSetID, &w.t, `UPDATE claim SET id = ? WHERE cid = ? AND key = ? AND pid = ?`},
		{&w.tAside, &w.t, `INSERT OR REPLACE INTO quarantine(cid, key, pid, value, ts, sig, id, seq, found)
			SELECT cid, key, pid, value, ts, sig, id, seq, ? FROM claim WHERE cid = ? AND key = ? AND pid = ?`},
		{&w.tDelClaim, &w.t, `DELETE FROM claim WHERE cid = ? AND key = ? AND pid = ?`},
		{&w.tUnaside, &w.t, `DELETE FROM quarantine WHERE cid = ? AND key = ? AND pid = ?`},
		{&w.tAddEdge, &w.t, `INSERT OR IGNORE INTO group_edge(cid, other, pid) VALUES(?, ?, ?)`},
		{&w.tEdgesOf, &w.t, `SELECT other, pid FROM group_edge WHERE cid = ?`},
		{&w.tEdgesBy, &w.t, `SELECT cid, other FROM group_edge WHERE pid = ?`},
		{&w.tSetMeta, &w.t, `INSERT INTO meta(name, value) VALUES(?, ?) ON CONFLICT(name) DO UPDATE SET value = excluded.value`},
		// One statement for the three counters every commit writes.
		{&w.tSetCounts, &w.t, `INSERT INTO meta(name, value) VALUES('last_seq', ?), ('claims_live', ?), ('claims_tomb', ?)
			ON CONFLICT(name) DO UPDATE SET value = excluded.value`},
		{&w.tSetTrust, &w.t, `INSERT INTO trust(uid, state, note, added) VALUES(?, ?, ?, ?)
			ON CONFLICT(uid) DO UPDATE SET state = excluded.state, note = excluded.note, added = excluded.added`},
		{&w.cGet, &w.c, `SELECT v FROM kv WHERE k = ?`},
		{&w.cPut, &w.c, `INSERT INTO kv(k, v) VALUES(?, ?) ON CONFLICT(k) DO UPDATE SET v = excluded.v`},
		{&w.cPutN, &w.c, `INSERT INTO kv(k, v) VALUES` + multiValues(rowsPerStmt, 2) + ` ON CONFLICT(k) DO UPDATE SET v = excluded.v`},
		{&w.cDel, &w.c, `DELETE FROM kv WHERE k = ?`},
		{&w.cRange, &w.c, `SELECT k, v FROM kv WHERE k >= ? AND k < ?`},
		{&w.cDelRange, &w.c, `DELETE FROM kv WHERE k >= ? AND k < ?`},
		{&w.cCBP, &w.c, `INSERT OR IGNORE INTO claim_by_pid(pid, seq, cid, key) VALUES(?, ?, ?, ?)`},
		{&w.cCBPN, &w.c, `INSERT OR IGNORE INTO claim_by_pid(pid, seq, cid, key) VALUES` + multiValues(rowsPerStmt, 4)},
		{&w.cSelCBP, &w.c, `SELECT cid, key FROM claim_by_pid WHERE pid = ?`},
		{&w.cFTSIns, &w.c, `INSERT INTO fts(rid, hay) VALUES(?, ?)`},
		{&w.cFTSUpd, &w.c, `UPDATE fts SET hay = ? WHERE rowid = ?`},
		{&w.cFTSDel, &w.c, `DELETE FROM fts WHERE rowid = ?`},
		{&w.cLocalBy, &w.c, `SELECT path, size, mtime FROM local_file WHERE midhash = ? ORDER BY path LIMIT 1`},
		{&w.cLocalGet, &w.c, `SELECT midhash, size FROM local_file WHERE path = ?`},
		{&w.cLocalPut, &w.c, `INSERT INTO local_file(path, midhash, size, mtime) VALUES(?, ?, ?, ?)
			ON CONFLICT(path) DO UPDATE SET midhash = excluded.midhash, size = excluded.size, mtime = excluded.mtime`},
		{&w.cLocalDel, &w.c, `DELETE FROM local_file WHERE path = ?`},
		{&w.cHay, &w.c, `SELECT k, v FROM kv WHERE k IN (?, ?, ?, ?, ?)`},
		{&w.cEvCut, &w.c, `SELECT k FROM kv WHERE k >= ? AND k < ? ORDER BY k LIMIT 1 OFFSET ?`},
	}
	for _, p := range list {
		st, err := p.conn.prepare(p.sql)
		if err != nil {
			return err
		}
		*p.dst = st
	}
	for _, st := range []*rawStmt{w.cGet, w.cDel, w.cRange, w.cDelRange, w.cHay, w.cEvCut} {
		st.before = w.flushKV
	}
	return nil
}

// putKV queues a kv upsert (see kvRows).
func (w *writer) putKV(k, v string) error {
	w.kvRows = append(w.kvRows, k, v)
	if len(w.kvRows) >= 2*rowsPerStmt {
		return w.flushKV()
	}
	return nil
}

// rollbackCache ends a failed cache transaction and drops its queued kv
// upserts (the next statement with a before hook would write them outside
// any transaction).
func (w *writer) rollbackCache() {
	w.dropKV()
	_ = w.c.exec("ROLLBACK")
}

func (w *writer) dropKV() {
	clear(w.kvRows)
	w.kvRows = w.kvRows[:0]
}

// flushKV writes the queued kv upserts.
func (w *writer) flushKV() error {
	if len(w.kvRows) == 0 {
		return nil
	}
	err := execRows(w.cPutN, w.cPut, 2, w.kvRows)
	clear(w.kvRows)
	w.kvRows = w.kvRows[:0]
	return err
}

// loop serves requests until the store's context ends. Whatever is queued
// when the writer wakes up goes into one batch (group commit), up to
// MaxBatch claims; a Clear runs alone.
func (w *writer) loop() {
	s := w.s
	w.startCacheScrub()
	defer func() {
		if w.cscrub.timer != nil {
			w.cscrub.timer.Stop()
		}
	}()
	for {
		// A trust change's re-merge runs a chunk per round; requests
		// queued meanwhile go between chunks.
		if w.remerge.pending() && s.ctx.Err() == nil {
			w.remergeNext()
			if len(s.reqs) == 0 && w.remerge.pending() {
				continue
			}
		}
		if !w.remerge.pending() && len(w.remerge.hold) > 0 {
			w.endRemerge(w.behindErr()) // the queue emptied another way (a rebuild)
		}
		if w.check != nil && !w.remerge.pending() && !w.cacheBehind && s.ctx.Err() == nil {
			w.finishCacheCheck() // every record checked (cacherepair.go)
		}
		if s.ctx.Err() == nil {
			w.runDamage() // rows reported damaged, by readers or by this writer's merges
		}
		var first *request
		select {
		case <-s.ctx.Done():
			w.endRemerge(nil) // durable in truth; the next boot rebuilds the cache
			w.drain()
			return
		case first = <-s.reqs:
		case <-s.damage.wake:
			continue
		case <-w.cscrub.c():
			w.scrubCacheStep()
			continue
		}
		batch := []*request{first}
		n := first.weight()
		var clearReq *request
		if first.kind == reqClear {
			clearReq, batch = first, nil
		}
	gather:
		for clearReq == nil && n < s.cfg.MaxBatch {
			select {
			case r := <-s.reqs:
				if r.kind == reqClear {
					clearReq = r
					break gather
				}
				batch = append(batch, r)
				n += r.weight()
			default:
				break gather
			}
		}
		s.met.queue.Sub(float64(len(batch)))
		if len(batch) > 0 {
			w.run(batch)
		}
		if clearReq != nil {
			s.met.queue.Dec()
			w.runClear(clearReq)
		}
	}
}

// drain answers every queued request with ErrClosed.
func (w *writer) drain() {
	for {
		select {
		case r := <-w.s.reqs:
			w.s.met.queue.Dec()
			r.err = ErrClosed
			close(r.done)
		default:
			return
		}
	}
}

func reply(reqs []*request, err error) {
	for _, r := range reqs {
		if err != nil {
			r.err = err
		}
		close(r.done)
	}
}

// run processes one batch: the truth transaction (claims, trust changes,
// new groups for files), then the cache transaction that applies it, then
// the in-memory state and the subscribers, then the answers.
func (w *writer) run(reqs []*request) {
	s := w.s
	start := time.Now()
	if err := w.catchUpIfBehind(); err != nil {
		reply(reqs, err)
		return
	}
	b := newBatch(w)
	if err := w.truthPhase(b, reqs); err != nil {
		_ = w.t.exec("ROLLBACK")
		err = w.failed(true, err)
		s.log.Error("truth transaction failed", "err", err)
		if lerr := w.loadState(); lerr != nil {
			s.log.Error("reload state", "err", lerr)
		}
		reply(reqs, fmt.Errorf("%w: truth: %v", ErrUnavailable, err))
		return
	}
	// Truth is durable: the trust view follows it now. The sync set waits
	// for the cache commit: a peer that learns of a claim from it may fetch
	// the claim's record at once, and must find it merged.
	ops := w.resolveSync(b)
	if b.viewChanged {
		s.trust.Store(w.view)
	}
	if err := w.applyPhase(b, reqs); err != nil {
		w.rollbackCache()
		w.abandonCheck()
		w.cacheBehind = true
		w.syncPending = append(w.syncPending, ops...) // applied once the catch-up commits
		w.reloadCacheCounters()
		err = w.failed(false, err)
		s.log.Error("cache transaction failed; will catch up", "err", err)
		reply(reqs, fmt.Errorf("%w: cache: %v", ErrUnavailable, err))
		return
	}
	w.committed()
	w.applySync(ops)
	w.publishStats()
	if b.asideChanged {
		w.publishDamage()
	}
	s.hub.publish(b.events)
	for _, r := range reqs {
		if r.kind == reqSubmit {
			for i := range r.results {
				s.met.claims.WithLabelValues(r.results[i].Outcome.String()).Inc()
			}
		}
	}
	s.met.commit.Observe(time.Since(start).Seconds())
	s.met.batch.Observe(float64(b.claims))
	if b.trustChanged {
		s.signalTrust() // before the answer: a caller may look right away
	}
	reply(w.holdTrust(b, reqs), nil)
}

// catchUpIfBehind brings the cache up to truth after a failed cache
// transaction, before the next one.
func (w *writer) catchUpIfBehind() error {
	if !w.cacheBehind {
		return nil
	}
	if err := w.catchUp(); err != nil {
		err = w.failed(false, err)
		w.s.log.Error("cache catch-up failed", "err", err)
		return fmt.Errorf("%w: cache: %v", ErrUnavailable, err)
	}
	w.applySync(w.syncPending)
	w.syncPending = nil
	return nil
}

// failed explains a failed write transaction's error (truth: on the
// truth file) and reports it to the node's health until a commit.
func (w *writer) failed(truth bool, err error) error {
	path := w.s.cfg.CachePath
	if truth {
		path = w.truthPath
	}
	corrupt := !truth && isCorrupt(err)
	err = explain(truth, path, err)
	w.s.health.noteWrite(err, time.Now())
	if corrupt {
		w.markCacheDamaged(err)
	}
	return err
}

// markCacheDamaged has the next start delete the cache and rebuild it
// (meta cache_damaged in truth, read by Open): a page SQLite calls corrupt
// stays so, and neither a catch-up nor a rebuild in place can be trusted
// on it. Health says so until then.
func (w *writer) markCacheDamaged(err error) {
	w.s.health.noteCacheDamaged(err, time.Now())
	if _, merr := w.tSetMeta.exec("cache_damaged", time.Now().UTC().Format(time.RFC3339)); merr != nil {
		w.s.log.Error("marking the damaged cache for a rebuild at the next start", "err", merr)
	}
}

// committed clears the failing state after a commit.
func (w *writer) committed() { w.s.health.noteWrite(nil, time.Time{}) }

// behindErr is what a request answered while the cache is behind truth gets.
func (w *writer) behindErr() error {
	if w.cacheBehind {
		return fmt.Errorf("%w: cache: behind truth, caught up with the next write", ErrUnavailable)
	}
	return nil
}

func (w *writer) publishStats() {
	st := &w.s.stats
	st.records.Store(w.records)
	st.live.Store(w.live)
	st.tomb.Store(w.tomb)
	st.files.Store(w.files)
	st.fileSize.Store(w.fileSize)
	st.lastSeq.Store(w.lastSeq)
	st.appliedSeq.Store(w.appliedSeq())
}

// ---- the sync set ----

// syncOp is one change of the sync set. Before it is resolved, add is
// conditional on the signer being trusted once the batch ends.
type syncOp struct {
	pid      int64
	del, add SyncItem
	hasDel   bool
	hasAdd   bool
	reset    bool
}

// resolveSync resolves the batch's sync changes against its final trust
// view.
func (w *writer) resolveSync(b *batch) []syncOp {
	ops := b.sync[:0]
	for _, op := range b.sync {
		if op.hasAdd && !w.trustedPID(op.pid) {
			op.hasAdd = false
		}
		if op.hasAdd || op.hasDel || op.reset {
			ops = append(ops, op)
		}
	}
	return ops
}

// applySyncOps resolves and applies a batch's sync changes at once (Clear:
// removing items early is safe).
func (w *writer) applySyncOps(b *batch) { w.applySync(w.resolveSync(b)) }

// applySync applies resolved sync changes; while the loader runs they are
// also logged so its final replay cannot lose them.
func (w *writer) applySync(ops []syncOp) {
	if len(ops) == 0 {
		return
	}
	s := w.s
	s.syncMu.Lock()
	applyOps(s.sync, ops)
	if !s.syncLoaded.Load() {
		s.syncLog = append(s.syncLog, ops...)
	}
	s.syncMu.Unlock()
}

func applyOps(set *SyncSet, ops []syncOp) {
	for _, op := range ops {
		if op.reset {
			set.Load(nil)
		}
		if op.hasDel {
			set.Remove(op.del)
		}
		if op.hasAdd {
			set.Add(op.add)
		}
	}
}

func (w *writer) trustedPID(pid int64) bool {
	return w.view.trusted(w.s.princ.uidOf(pid))
}

// sortedKeys returns a map's keys in order (deterministic batches).
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
