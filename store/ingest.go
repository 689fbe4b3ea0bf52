package store

import (
	"bytes"
	"database/sql/driver"
	"fmt"
	"strconv"
	"time"
)

// ck names the truth rows of one (cid, key): one per signer.
type ck struct{ cid, key string }

type cbpRow struct {
	pid, seq int64
	cid, key string
}

// batch is the writer's state for one group commit: what the truth
// transaction changed, for the cache transaction to apply.
type batch struct {
	w         *writer
	rows      map[ck][]row        // every stored row of a (cid, key), as of now in the transaction
	fresh     map[string]bool     // cids known to have no rows before this batch
	keys      map[ck]struct{}     // (cid, key) whose merged value may have changed
	revoted   map[string]struct{} // cids a signer's trust change re-merges in full
	claimed   map[string]bool     // cids a claim of this batch was stored for
	regrouped map[string]bool     // rids a join or split changed (their cids moved)
	full      map[string]bool     // rids to recompute in full (joined, gained a cid)
	created   map[string]bool     // rids created in this batch: no cache rows yet
	lost      map[string]bool     // rids absorbed by a join
	local     map[string]bool     // rids whose box-local fields to refresh
	fts       map[string]bool     // rids whose search row to rewrite
	added     [][2]string         // (rid, cid): a cid with no claims joined an existing group
	regroup   []string            // cids whose group lost a signer's links: split if no longer connected
	edges     []edgeRef           // links stored in this batch
	cbp       []cbpRow            // new claim_by_pid rows
	sync      []syncOp            // sync set changes, in order
	events    []streamEvent       // events written in this batch, for the subscribers
	tRows     []driver.Value      // truth rows decided but not yet written (8 values each), see flushTruthRows
	claims    int                 // claims that reached the writer

	hay map[string]map[string]string // haystack fields of rids created in this batch, as setField wrote them

	startView    *trustView
	viewCloned   bool
	viewChanged  bool // the list or the vouches changed
	trustChanged bool // the effective trusted set changed
	rehomed      bool // a signer trusted throughout changed home: its votes count elsewhere
	rebuild      bool // truth changes a per-claim catch-up could not replay
	queued       bool // planRemerge queued records of this batch: its trust requests wait for the queue
	inTruth      bool // the truth transaction is open: damaged rows b.load meets are settled at once
	asideChanged bool // the quarantine changed (damage.go)
	nowMS        int64
}

func newBatch(w *writer) *batch {
	w.dropKV() // a failed cache transaction's leftovers, should any remain
	return &batch{
		w:         w,
		rows:      map[ck][]row{},
		fresh:     map[string]bool{},
		keys:      map[ck]struct{}{},
		revoted:   map[string]struct{}{},
		claimed:   map[string]bool{},
		regrouped: map[string]bool{},
		full:      map[string]bool{},
		created:   map[string]bool{},
		lost:      map[string]bool{},
		local:     map[string]bool{},
		fts:       map[string]bool{},
		startView: w.view,
		nowMS:     w.s.cfg.Now().UnixMilli(),
	}
}

// setHay records a haystack field setField wrote for a record created in
// this batch (has false: deleted).
func (b *batch) setHay(rid, key, v string, has bool) {
	m := b.hay[rid]
	if m == nil {
		if !has {
			return
		}
		if b.hay == nil {
			b.hay = map[string]map[string]string{}
		}
		m = map[string]string{}
		b.hay[rid] = m
	}
	if has {
		m[key] = v
	} else {
		delete(m, key)
	}
}

// load returns every stored row of k, reading truth once per batch.
func (b *batch) load(k ck) ([]row, error) {
	if rs, ok := b.rows[k]; ok {
		return rs, nil
	}
	if b.fresh[k.cid] {
		b.rows[k] = nil
		return nil, nil
	}
	rs, bad, err := b.w.selRows(k)
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		if !b.inTruth {
			for _, ref := range bad {
				b.w.s.reportDamage(ref)
			}
		} else {
			// Settled at once: a claim of this batch may be the genuine
			// one, and must not find the damaged row in its place.
			if err := b.w.settle(b, bad); err != nil {
				return nil, err
			}
			if rs, _, err = b.w.selRows(k); err != nil {
				return nil, err
			}
		}
	}
	b.rows[k] = rs
	return rs, nil
}

// selRows reads every stored row of k, leaving out those that fail their
// id check (damage.go), which it returns apart.
func (w *writer) selRows(k ck) (rs []row, bad []damageRef, err error) {
	err = w.tSelRows.query(func(d []driver.Value) error {
		r := rowFromValue(asInt(d[0]), d[1], asInt(d[2]), asID(d[3]))
		if !w.s.intact(k.cid, k.key, &r) {
			bad = append(bad, damageRef{k.cid, k.key, r.pid})
			return nil
		}
		rs = append(rs, r)
		return nil
	}, k.cid, k.key)
	return rs, bad, err
}

// cloneView gives the batch its own trust view to change.
func (b *batch) cloneView() {
	if !b.viewCloned {
		b.w.view = b.w.view.clone()
		b.viewCloned = true
	}
}

// truthPhase runs the truth transaction of a batch.
// setTruthSync picks the truth commit's sync mode. A batch of claims from
// peers only (gossip, sync, fetch) commits with synchronous=NORMAL: no
// fsync, yet it survives a crash of the process (the WAL is written before
// the answer), and a power cut can only roll back claims the peers still
// hold, which the next sync brings back (the cache, ahead of truth then, is
// rebuilt at boot). Everything else — a local write, a trust change, files —
// commits with FULL: an answer means on disk. The next FULL commit's fsync
// makes the NORMAL ones before it durable too (one WAL file, in order). A
// one-claim gossip commit saves its fsync, the largest part of its cost.
func (w *writer) setTruthSync(normal bool) error {
	mode := "full"
	if normal {
		mode = "normal"
	}
	w.s.met.truthCommits.WithLabelValues(mode).Inc()
	if normal == w.truthNormal {
		return nil
	}
	if err := w.t.exec("PRAGMA synchronous=" + mode); err != nil {
		return err
	}
	w.truthNormal = normal
	return nil
}

// peerOnly reports whether a batch holds only claims from peers.
func peerOnly(reqs []*request) bool {
	for _, r := range reqs {
		if r.kind != reqSubmit || r.origin == OriginLocal {
			return false
		}
	}
	return true
}

func (w *writer) truthPhase(b *batch, reqs []*request) error {
	needed := false
	for _, r := range reqs {
		switch r.kind {
		case reqSubmit, reqTrust, reqFiles:
			needed = true
		case reqDamage:
			needed = needed || w.s.damagePending()
		}
	}
	if !needed {
		return nil
	}
	if err := w.setTruthSync(peerOnly(reqs)); err != nil {
		return err
	}
	if err := w.t.exec("BEGIN IMMEDIATE"); err != nil {
		return err
	}
	b.inTruth = true
	defer func() { b.inTruth = false }()
	startSeq := w.lastSeq
	for _, r := range reqs {
		var err error
		switch r.kind {
		case reqSubmit:
			err = w.ingest(b, r)
		case reqTrust:
			err = w.setTrust(b, r)
		case reqFiles:
			err = w.fileGroups(b, r)
		case reqDamage:
			err = w.settle(b, w.s.takeDamage())
		}
		if err != nil {
			return err
		}
	}
	if b.viewChanged {
		b.w.view.build()
		if err := w.trustDelta(b, b.startView, w.view); err != nil {
			return err
		}
		// A signer trusted for part of the batch only: its links joined
		// groups, yet it ends the batch untrusted, like a distrust after
		// the batch would leave it (batching must not decide groups).
		for _, e := range b.edges {
			if !w.trustedPID(e.pid) {
				b.regroup = append(b.regroup, e.cid)
			}
		}
		if err := w.splitGroups(b, b.regroup); err != nil {
			return err
		}
		// Whose votes count, or in which home, changed (a trust-list
		// change or a vouch): a catch-up after a crash cannot replay that
		// claim by claim (a vouch sits on a peer-id cid, not on the
		// records it changes).
		if b.trustChanged || b.rehomed {
			b.rebuild = true
		}
	}
	if w.s.failTruth != nil {
		if err := w.s.failTruth(); err != nil {
			return err
		}
	}
	if b.rebuild {
		w.lastSeq++
		w.rebuildSeq = w.lastSeq
		if _, err := w.tSetMeta.exec("rebuild_seq", strconv.FormatInt(w.rebuildSeq, 10)); err != nil {
			return err
		}
	}
	if w.lastSeq != startSeq {
		_, err := w.tSetCounts.exec(strconv.FormatInt(w.lastSeq, 10), strconv.FormatInt(w.live, 10), strconv.FormatInt(w.tomb, 10))
		if err != nil {
			return err
		}
	} else if !w.truthNormal && w.truthUnsynced {
		// A FULL commit that writes nothing (a local claim unchanged or
		// stale) does not fsync, and the claim it answers "unchanged" may
		// be a peer's copy committed without one: write a row that always
		// changes (SQLite skips identical rewrites) so that it does.
		if _, err := w.tSetMeta.exec("synced_at", strconv.FormatInt(time.Now().UnixNano(), 10)); err != nil {
			return err
		}
	}
	if err := w.t.exec("COMMIT"); err != nil {
		return err
	}
	w.truthUnsynced = w.truthNormal
	return nil
}

// ingest stores the claims of one Submit (claims.md §4). Claims already
// refused (prefilled results) are skipped; the rest get their outcome.
func (w *writer) ingest(b *batch, r *request) error {
	for i := range r.claims {
		res := &r.results[i]
		if res.Outcome == Rejected {
			continue
		}
		c := &r.claims[i]
		id := r.ids[i]
		b.claims++
		if !w.view.trusted(c.UID) {
			res.Outcome, res.Err = Rejected, fmt.Errorf("%w: %s is not trusted by this node", ErrUntrusted, c.UID)
			continue
		}
		pid, err := w.pidFor(c.UID)
		if err != nil {
			return err
		}
		peer := isPeerCID(c.CID)
		if !peer {
			if _, ok := w.s.groups.ridOf(c.CID); !ok {
				if r.recheck != nil && r.recheck[i] {
					// It looked stored, yet its cid has no group (a Clear
					// ran since): verify it before it makes a record.
					if err := c.VerifyID(id); err != nil {
						res.Outcome, res.Err = Rejected, err
						continue
					}
					r.recheck[i] = false
				}
				if err := w.newGroup(b, c.CID, r.rids[c.CID]); err != nil {
					return err
				}
			}
		}
		k := ck{c.CID, c.Key}
		rows, err := b.load(k)
		if err != nil {
			return err
		}
		oi := -1
		for j := range rows {
			if rows[j].pid == pid {
				oi = j
				break
			}
		}
		if r.recheck != nil && r.recheck[i] {
			// Submit skipped its verification because it looked stored.
			// The stored claim itself (same id and signature: the id does
			// not cover the signature) needs nothing more; any other copy
			// is verified before it can link, become a row or be answered.
			stored := false
			if oi >= 0 && rows[oi].id == id {
				if err := w.flushTruthRows(b); err != nil { // the stored row may be one of this batch's
					return err
				}
				if stored, err = w.storedSig(k, pid, c.Sig[:]); err != nil {
					return err
				}
			}
			if !stored {
				if err := c.VerifyID(id); err != nil {
					res.Outcome, res.Err = Rejected, err
					continue
				}
			}
		}
		// A live link joins groups whether or not it becomes the row:
		// arrival order must not decide the groups (a retraction that
		// arrived first would otherwise make the link stale and unjoined).
		if target, live := c.LinkTarget(); live && !peer && !isPeerCID(target) {
			if _, err := w.tAddEdge.exec(c.CID, target, pid); err != nil {
				return err
			}
			if err := w.link(b, c.CID, target); err != nil {
				return err
			}
			b.edges = append(b.edges, edgeRef{c.CID, pid})
		}
		nr := rowOf(pid, c, id)
		if oi >= 0 {
			if rows[oi].id == id {
				res.Outcome = Unchanged
				continue
			}
			if rows[oi].beats(&nr) {
				res.Outcome = Stale
				continue
			}
		}
		w.lastSeq++
		b.tRows = append(b.tRows, c.CID, c.Key, pid, sqlValue(c), int64(c.TS), c.Sig[:], r.ids[i][:], w.lastSeq)
		if len(b.tRows) >= 8*rowsPerStmt {
			if err := w.flushTruthRows(b); err != nil {
				return err
			}
		}
		res.Outcome, res.Stored = Accepted, true
		if oi >= 0 {
			old := rows[oi]
			if old.kind == nr.kind && old.val == nr.val {
				res.Outcome = Unchanged
			}
			w.count(old.kind, -1)
			rows[oi] = nr
			b.sync = append(b.sync, syncOp{pid: pid, del: old.item(), hasDel: true, add: nr.item(), hasAdd: true})
		} else {
			b.rows[k] = append(rows, nr)
			b.cbp = append(b.cbp, cbpRow{pid, w.lastSeq, c.CID, c.Key})
			b.sync = append(b.sync, syncOp{pid: pid, add: nr.item(), hasAdd: true})
		}
		w.count(nr.kind, 1)
		if len(w.dmg.aside) > 0 {
			if err := w.resolveAside(b, damageRef{c.CID, c.Key, pid}, &nr); err != nil {
				return err
			}
		}
		b.keys[k] = struct{}{}
		b.claimed[c.CID] = true
		if uid, ok := vouchOf(c, w.s.peerCID); ok {
			b.cloneView()
			if w.view.setVouch(c.UID, uid, c.Kind == KindText && string(c.Value) == "true") {
				w.view.build()
				b.viewChanged = true
			}
		}
	}
	return w.flushTruthRows(b)
}

// flushTruthRows writes the truth rows ingest decided. Every outcome is
// decided in Go from the rows b.load read (which never reads a key with a
// row still buffered: such a key is in b.rows), so the rows go in
// multi-row upserts, in order (a second row for the same (cid, key, pid)
// updates the first, as one statement per row would). Nothing reads the
// claim table between ingest's decision and this flush except storedSig,
// which flushes first.
func (w *writer) flushTruthRows(b *batch) error {
	err := execRows(w.tUpsertN, w.tUpsert, 8, b.tRows)
	clear(b.tRows)
	b.tRows = b.tRows[:0]
	return err
}

// storedSig reports whether the stored row (k, pid) carries sig.
func (w *writer) storedSig(k ck, pid int64, sig []byte) (bool, error) {
	dest := make([]driver.Value, 1)
	ok, err := w.tSelSig.one(dest, k.cid, k.key, pid)
	if err != nil || !ok {
		return false, err
	}
	stored, _ := dest[0].([]byte)
	return bytes.Equal(stored, sig), nil
}

func (w *writer) count(k Kind, d int64) {
	if k == KindRetraction {
		w.tomb += d
	} else {
		w.live += d
	}
}

// pidFor returns uid's pid, adding a principal row for a new signer.
func (w *writer) pidFor(uid string) (int64, error) {
	if pid, ok := w.s.princ.pidOf(uid); ok {
		return pid, nil
	}
	pid, err := w.tInsPrincipal.execID(uid)
	if err != nil {
		return 0, err
	}
	w.s.princ.add(uid, pid)
	return pid, nil
}

// newGroup gives a cid with no group a record of its own: under want
// (SubmitOptions.RIDs) when that is a rid no group has, else a fresh one.
func (w *writer) newGroup(b *batch, cid, want string) error {
	rid := want
	if !IsRID(rid) || len(w.s.groups.cidsOf(rid)) > 0 {
		rid = NewRID()
	}
	if _, err := w.tSetGroup.exec(cid, rid); err != nil {
		return err
	}
	w.s.groups.add(cid, rid)
	b.created[rid] = true
	b.fresh[cid] = true
	return nil
}

// link puts target in the group of cid, joining two groups if needed: the
// smaller rid survives. A crash before the cache commit then needs a full
// rebuild (the losing rid is gone from truth).
func (w *writer) link(b *batch, cid, target string) error {
	g := w.s.groups
	ra, _ := g.ridOf(cid)
	rb, ok := g.ridOf(target)
	if !ok {
		if _, err := w.tSetGroup.exec(target, ra); err != nil {
			return err
		}
		g.add(target, ra)
		b.fresh[target] = true
		b.added = append(b.added, [2]string{ra, target}) // no claims, no files: only its member row
		b.rebuild = true
		return nil
	}
	if ra == rb {
		return nil
	}
	survivor, loser, moved := g.join(ra, rb)
	for _, c := range moved {
		if _, err := w.tSetGroup.exec(c, survivor); err != nil {
			return err
		}
	}
	b.full[survivor] = true
	b.regrouped[survivor] = true
	delete(b.full, loser)
	b.lost[loser] = true
	b.rebuild = true
	return nil
}

// setTrust writes a trust-list change.
func (w *writer) setTrust(b *batch, r *request) error {
	b.cloneView()
	row := trustRow{state: r.state, note: r.note, added: w.s.cfg.Now()}
	if !r.at.IsZero() {
		row.added = r.at
	}
	// As stored and as reloaded at the next start (milliseconds): the
	// list reads the same before and after a restart.
	row.added = time.UnixMilli(row.added.UnixMilli())
	if old, ok := w.view.list[r.uid]; ok && old.state == r.state {
		row.added = old.added
		if r.note == "" {
			row.note = old.note
		}
	}
	if _, err := w.tSetTrust.exec(r.uid, row.state, row.note, row.added.UnixMilli()); err != nil {
		return err
	}
	w.view.list[r.uid] = row
	w.view.build()
	b.viewChanged = true
	b.rebuild = true
	return nil
}

// fileGroups gives the new cids of file updates a record.
func (w *writer) fileGroups(b *batch, r *request) error {
	for _, u := range r.files {
		if u.Op != FileAdd && u.Op != FileChange && u.Op != FileRename {
			continue
		}
		if _, ok := w.s.groups.ridOf(u.File.CID); ok {
			continue
		}
		if err := w.newGroup(b, u.File.CID, ""); err != nil {
			return err
		}
		b.rebuild = true
	}
	return nil
}

// rowItem is the sync item of pid's row of k, if it has one. Rows this
// batch loaded (and may have changed) come from b.rows; others by a point
// read that does not cache the key's rows: a trust change at scale reads
// one row for each of a signer's 100,000 claims, and most of their records
// are re-merged later, in chunks (remerge.go).
func (w *writer) rowItem(b *batch, k ck, pid int64) (SyncItem, bool, error) {
	if rows, ok := b.rows[k]; ok || b.fresh[k.cid] {
		for j := range rows {
			if rows[j].pid == pid {
				return rows[j].item(), true, nil
			}
		}
		return SyncItem{}, false, nil
	}
	dest := make([]driver.Value, 2)
	ok, err := w.tSelItem.one(dest, k.cid, k.key, pid)
	if err != nil || !ok {
		return SyncItem{}, false, err
	}
	return SyncItem{TS: uint64(asInt(dest[0])), ID: asID(dest[1])}, true, nil
}

// trustDelta handles signers whose trust changed during the batch: their
// stored claims join or leave the sync set, their votes are re-merged,
// their links join groups when they become trusted, and the groups their
// links had joined are split when they stop being trusted.
// A signer trusted at both ends whose home changed has its votes
// re-merged too (they count in another home now).
func (w *writer) trustDelta(b *batch, from, to *trustView) error {
	cands := map[string]struct{}{}
	for _, v := range []*trustView{from, to} {
		for u := range v.eff {
			cands[u] = struct{}{}
		}
		for u := range v.list {
			cands[u] = struct{}{}
		}
	}
	for _, uid := range sortedKeys(cands) {
		now := to.trusted(uid)
		if from.trusted(uid) == now {
			if now && from.homeOf(uid) != to.homeOf(uid) {
				b.rehomed = true
				if err := w.revote(b, uid, nil); err != nil {
					return err
				}
			}
			continue
		}
		b.trustChanged = true
		// Its claims join or leave the sync set.
		op := func(pid int64, it SyncItem) syncOp {
			if now {
				return syncOp{pid: pid, add: it, hasAdd: true}
			}
			return syncOp{pid: pid, del: it, hasDel: true}
		}
		if err := w.revote(b, uid, op); err != nil {
			return err
		}
		if err := w.relink(b, uid, now); err != nil {
			return err
		}
	}
	return nil
}

// revote marks every record uid has a claim on for a re-merge in full,
// and appends op's sync change for each of its claims (op nil: none).
// A signer's claims stream from claim_by_pid, plus this batch's new ones.
// At scale (a plugin with 117,000 claims) nothing here may hold a copy of
// all its keys: a trust change keeps only the cids whose records it
// re-merges. An entry listed twice (see recover.go) yields its op twice,
// which the sync set ignores (it neither adds an item it has nor removes
// one it lacks).
func (w *writer) revote(b *batch, uid string, op func(pid int64, it SyncItem) syncOp) error {
	pid, ok := w.s.princ.pidOf(uid)
	if !ok {
		return nil
	}
	visit := func(k ck) error {
		it, ok, err := w.rowItem(b, k, pid)
		if err != nil || !ok {
			return err
		}
		b.revoted[k.cid] = struct{}{}
		if op != nil {
			b.sync = append(b.sync, op(pid, it))
		}
		return nil
	}
	err := w.cSelCBP.query(func(d []driver.Value) error {
		return visit(ck{asString(d[0]), asString(d[1])})
	}, pid)
	if err != nil {
		return err
	}
	for _, r := range b.cbp {
		if r.pid == pid {
			if err := visit(ck{r.cid, r.key}); err != nil {
				return err
			}
		}
	}
	return nil
}

// relink joins the groups of a newly trusted signer's links, or splits
// (at the batch's end) those of a signer no longer trusted.
func (w *writer) relink(b *batch, uid string, trusted bool) error {
	pid, ok := w.s.princ.pidOf(uid)
	if !ok {
		return nil
	}
	edges, err := w.edgesBy(pid)
	if err != nil {
		return err
	}
	for _, e := range edges {
		if !trusted {
			b.regroup = append(b.regroup, e[0])
			continue
		}
		if _, has := w.s.groups.ridOf(e[0]); has {
			if err := w.link(b, e[0], e[1]); err != nil {
				return err
			}
		}
	}
	return nil
}
