package store

import (
	"context"
	"crypto/sha256"
	"database/sql/driver"
	"fmt"
	"path/filepath"
	"sync"
	"time"
)

// Damage at rest. A truth row holds a signed claim: its id is SHA-256 of
// the payload its columns spell, and its signature covers that id. A byte
// changed on disk (a failing disk, a hand edit) breaks one or the other,
// and a node that served such a row would hand its peers a claim nobody
// signed. So every path that hands a row's claim on — to a peer (sync,
// fetch), to the merge (a rebuild, a catch-up, a re-merge, one key's
// merge), to an API reader (claims, ?as=), to the trust view (vouches at
// boot) — recomputes its id first (about a microsecond) and leaves out a
// row whose id differs; the scrub (scrub.go) verifies every signature in
// the background, which also finds a changed signature. Such a row is
// reported to the writer, which reads it once more and verifies it:
//
//   - its signature holds for the payload its columns spell, and only the
//     id column changed: the id is written again (repaired);
//   - its signature does not hold: the row moves to the quarantine table
//     (truth), kept as it was for whoever wants to look, neither served
//     nor merged; its record is merged again without it and its item
//     leaves the sync set, so a peer that holds the genuine claim sends
//     it back at the next reconciliation (the node also asks, see
//     Damaged). IntegrityHealth names it until the genuine claim, or a
//     newer one of the same signer on the same field, is stored.
//
// Quarantine bumps rebuild_seq: a catch-up cannot replay a row that left
// truth, so a crash before the cache commit rebuilds the cache.

// writerDamage is the writer's side: the quarantine as truth holds it,
// rows it could not reach, and ids it wrote again.
type writerDamage struct {
	aside    map[damageRef]asideRow
	unmoved  map[damageRef]bool
	repaired int
	seen     int // damaged rows a merge from truth left out (computeRecord)
}

// damageRef names a truth row by its primary key.
type damageRef struct {
	cid, key string
	pid      int64
}

// asideRow is a quarantined row: its (ts, id) as stored, for resolving it
// when a claim of the same signer on the same field is stored again.
type asideRow struct {
	ts    uint64
	id    ID
	found time.Time
}

// maxPendingDamage bounds the rows reported and not yet settled by the
// writer; more are dropped (found again by the next read or scrub).
const maxPendingDamage = 4096

// damageState is the rows reported to the writer, what it has set aside
// (for health), and the signal the node re-fetches on.
type damageState struct {
	mu      sync.Mutex
	pending map[damageRef]struct{}
	wake    chan struct{} // the writer's: rows are pending
	changed chan struct{} // Damaged(): rows were set aside

	aside    int       // rows in quarantine
	since    time.Time // the oldest of them was found
	latest   string    // the newest, described
	unmoved  int       // reported rows the writer could not find by their key
	repaired int       // id columns written again since Open

	check cacheProgress // a cache check under way (cacherepair.go)
}

func newDamageState() damageState {
	return damageState{pending: map[damageRef]struct{}{}, wake: make(chan struct{}, 1), changed: make(chan struct{}, 1)}
}

// rowID is the id of the claim a truth row spells.
func rowID(uid, cid, key string, r *row) ID {
	var buf [512]byte
	return sha256.Sum256(appendPayload(buf[:0], uid, cid, key, r.kind, r.val, r.ts))
}

// intact reports whether a truth row's stored id is the id of the claim its
// columns spell.
func (s *Store) intact(cid, key string, r *row) bool {
	return rowID(s.princ.uidOf(r.pid), cid, key, r) == r.id
}

// checked is intact for a reader: a row that fails is reported to the
// writer and left out by the caller.
func (s *Store) checked(cid, key string, r *row) bool {
	if s.intact(cid, key, r) {
		return true
	}
	s.reportDamage(damageRef{cid, key, r.pid})
	return false
}

// reportDamage hands a row that failed its check to the writer.
func (s *Store) reportDamage(ref damageRef) {
	d := &s.damage
	d.mu.Lock()
	if _, ok := d.pending[ref]; ok || len(d.pending) >= maxPendingDamage {
		d.mu.Unlock()
		return
	}
	d.pending[ref] = struct{}{}
	d.mu.Unlock()
	s.met.damageFound.Inc()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// takeDamage returns the pending rows and forgets them.
func (s *Store) takeDamage() []damageRef {
	d := &s.damage
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.pending) == 0 {
		return nil
	}
	refs := make([]damageRef, 0, len(d.pending))
	for r := range d.pending {
		refs = append(refs, r)
	}
	clear(d.pending)
	return refs
}

func (s *Store) damagePending() bool {
	d := &s.damage
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.pending) > 0
}

// runDamage settles the pending rows in a batch of their own.
func (w *writer) runDamage() {
	if !w.s.damagePending() {
		return
	}
	w.run([]*request{{kind: reqDamage, done: make(chan struct{})}})
}

// settle reads each reported row again (inside the truth transaction) and
// repairs its id or sets it aside (see above). A row no longer there, or
// intact now, was replaced meanwhile.
func (w *writer) settle(b *batch, refs []damageRef) error {
	for _, ref := range refs {
		if err := w.settleRow(b, ref); err != nil {
			return err
		}
	}
	return nil
}

func (w *writer) settleRow(b *batch, ref damageRef) error {
	dest := make([]driver.Value, 4)
	ok, err := w.tSelFull.one(dest, ref.cid, ref.key, ref.pid)
	if err != nil {
		return err
	}
	if !ok {
		// Gone (set aside or replaced meanwhile), or not found by its own
		// key: a key column changed and the row sits out of order, where
		// no lookup reaches it (nor a DELETE).
		if _, gone := w.dmg.aside[ref]; gone || w.dmg.unmoved[ref] || !w.stillThere(ref) {
			return nil
		}
		w.dmg.unmoved[ref] = true
		b.asideChanged = true
		w.s.log.Error("a damaged claim row cannot be reached by its key, so it cannot be set aside: truth.db's order is damaged",
			"cid", ref.cid, "key", ref.key, "pid", ref.pid)
		return nil
	}
	storedID, _ := dest[2].([]byte)
	r := rowFromValue(ref.pid, dest[0], asInt(dest[1]), asID(storedID))
	sig, _ := dest[3].([]byte)
	uid := w.s.princ.uidOf(ref.pid)
	c := claimOf(uid, ref.cid, ref.key, &r, sig)
	id := c.ID()
	valid := len(sig) == SigBytes && c.VerifyID(id) == nil
	switch {
	case valid && id == r.id && len(storedID) == len(id):
		return nil
	case valid:
		return w.repairID(b, ref, &r, id)
	}
	return w.setAside(b, ref, &r, uid)
}

// stillThere reports whether a full scan finds a row the key lookup missed
// (rare: only after a lookup failed on a reported row).
func (w *writer) stillThere(ref damageRef) bool {
	found := false
	_ = w.t.queryOnce(`SELECT 1 FROM claim NOT INDEXED WHERE cid = ? AND key = ? AND pid = ? LIMIT 1`,
		func([]driver.Value) error {
			found = true
			return nil
		}, ref.cid, ref.key, ref.pid)
	return found
}

// repairID writes again the id of a row whose payload verifies.
func (w *writer) repairID(b *batch, ref damageRef, r *row, id ID) error {
	if _, err := w.tSetID.exec(id[:], ref.cid, ref.key, ref.pid); err != nil {
		return err
	}
	old := r.item()
	r.id = id
	b.sync = append(b.sync, syncOp{pid: ref.pid, del: old, hasDel: true, add: r.item(), hasAdd: true})
	w.dropBatchRow(b, ref)
	w.remergeOf(b, ref.cid)
	b.rebuild = true
	w.dmg.repaired++
	b.asideChanged = true
	w.s.log.Warn("a claim's stored id was damaged; its signature holds, so the id was written again",
		"cid", ref.cid, "key", ref.key, "signer", w.s.princ.uidOf(ref.pid))
	return nil
}

// setAside moves a row whose signature does not hold to the quarantine
// table.
func (w *writer) setAside(b *batch, ref damageRef, r *row, uid string) error {
	now := time.Now()
	if _, err := w.tAside.exec(now.UnixMilli(), ref.cid, ref.key, ref.pid); err != nil {
		return err
	}
	if _, err := w.tDelClaim.exec(ref.cid, ref.key, ref.pid); err != nil {
		return err
	}
	w.count(r.kind, -1)
	b.sync = append(b.sync, syncOp{pid: ref.pid, del: r.item(), hasDel: true})
	w.dropBatchRow(b, ref)
	w.remergeOf(b, ref.cid)
	c := Claim{UID: uid, CID: ref.cid, Key: ref.key}
	if voucher, ok := vouchOf(&c, w.s.peerCID); ok {
		b.cloneView()
		if w.view.setVouch(c.UID, voucher, false) {
			w.view.build()
			b.viewChanged = true
		}
	}
	b.rebuild = true
	w.dmg.aside[ref] = asideRow{ts: r.ts, id: r.id, found: now}
	b.asideChanged = true
	w.s.met.damageAside.Inc()
	w.s.log.Warn("a damaged claim was set aside (quarantined): its signature does not hold; it is neither served nor merged until a peer sends the genuine claim",
		"cid", ref.cid, "key", ref.key, "signer", uid, "ts", r.ts)
	return nil
}

// dropBatchRow forgets a row the batch had loaded.
func (w *writer) dropBatchRow(b *batch, ref damageRef) {
	k := ck{ref.cid, ref.key}
	rows, ok := b.rows[k]
	if !ok {
		return
	}
	for i := range rows {
		if rows[i].pid == ref.pid {
			b.rows[k] = append(rows[:i:i], rows[i+1:]...)
			return
		}
	}
}

// remergeOf has the record holding cid merged again in full.
func (w *writer) remergeOf(b *batch, cid string) {
	if rid, ok := w.s.groups.ridOf(cid); ok {
		b.full[rid] = true
	}
}

// resolveAside takes a quarantined row off the list when the claim stored
// for its (cid, key, signer) is the genuine one or newer.
func (w *writer) resolveAside(b *batch, ref damageRef, nr *row) error {
	q, ok := w.dmg.aside[ref]
	if !ok || (nr.id != q.id && nr.ts < q.ts) {
		return nil
	}
	if _, err := w.tUnaside.exec(ref.cid, ref.key, ref.pid); err != nil {
		return err
	}
	delete(w.dmg.aside, ref)
	b.asideChanged = true
	w.s.log.Info("a quarantined claim is back: the genuine claim (or a newer one) was stored",
		"cid", ref.cid, "key", ref.key, "signer", w.s.princ.uidOf(ref.pid))
	return nil
}

// loadAside reads the quarantine at boot.
func (w *writer) loadAside() error {
	w.dmg.aside, w.dmg.unmoved = map[damageRef]asideRow{}, map[damageRef]bool{}
	return w.t.queryOnce(`SELECT cid, key, pid, ts, id, found FROM quarantine`, func(d []driver.Value) error {
		w.dmg.aside[damageRef{asString(d[0]), asString(d[1]), asInt(d[2])}] = asideRow{
			ts: uint64(asInt(d[3])), id: asID(d[4]), found: time.UnixMilli(asInt(d[5]))}
		return nil
	})
}

// publishDamage copies the writer's quarantine summary for health, and
// signals Damaged when rows were set aside.
func (w *writer) publishDamage() {
	d := &w.s.damage
	var oldest, newest time.Time
	var latest damageRef
	for ref, q := range w.dmg.aside {
		if oldest.IsZero() || q.found.Before(oldest) {
			oldest = q.found
		}
		if q.found.After(newest) || newest.IsZero() {
			newest, latest = q.found, ref
		}
	}
	d.mu.Lock()
	grew := len(w.dmg.aside) > d.aside
	d.aside, d.since, d.unmoved, d.repaired = len(w.dmg.aside), oldest, len(w.dmg.unmoved), w.dmg.repaired
	d.latest = ""
	if len(w.dmg.aside) > 0 {
		d.latest = fmt.Sprintf("signer %s, cid %s, key %q", w.s.princ.uidOf(latest.pid), latest.cid, latest.key)
	}
	d.mu.Unlock()
	w.s.met.quarantined.Set(float64(len(w.dmg.aside)))
	if grew {
		select {
		case d.changed <- struct{}{}:
		default:
		}
	}
}

// Damaged is signalled (coalesced) when claims found damaged were set
// aside: the node asks its peers for them (see Quarantined).
func (s *Store) Damaged() <-chan struct{} { return s.damage.changed }

// QuarantinedClaim is a claim set aside as damaged, by what it was about.
type QuarantinedClaim struct {
	UID, CID, Key string
	TS            uint64
	ID            ID // as stored (the genuine claim's, unless the id column changed too)
	Found         time.Time
}

// Quarantined lists the claims set aside as damaged, up to limit (0: all).
func (s *Store) Quarantined(ctx context.Context, limit int) (_ []QuarantinedClaim, err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return nil, err
	}
	q := `SELECT cid, key, pid, ts, id, found FROM quarantine ORDER BY found DESC`
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := s.truthR.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("quarantined: %w", err)
	}
	defer rows.Close()
	var out []QuarantinedClaim
	for rows.Next() {
		var cid, key, pid, ts, id, found any
		if err := rows.Scan(&cid, &key, &pid, &ts, &id, &found); err != nil {
			return nil, fmt.Errorf("quarantined: %w", err)
		}
		out = append(out, QuarantinedClaim{UID: s.princ.uidOf(asInt(pid)), CID: asString(cid), Key: asString(key),
			TS: uint64(asInt(ts)), ID: asID(id), Found: time.UnixMilli(asInt(found))})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("quarantined: %w", err)
	}
	return out, nil
}

// IntegrityHealth is nil unless damage was found and is not settled: claims
// set aside as damaged, damaged rows the writer could not reach, or a cache
// repair under way (cacherepair.go). Its text says what was found and what
// to do; the node reports itself degraded meanwhile.
func (s *Store) IntegrityHealth() error {
	d := &s.damage
	d.mu.Lock()
	aside, since, latest, unmoved := d.aside, d.since, d.latest, d.unmoved
	d.mu.Unlock()
	truth := filepath.Base(s.cfg.TruthPath)
	switch {
	case aside > 0:
		return fmt.Errorf("%d damaged claims in %s set aside (quarantined) since %s, the latest %s: their signatures do not hold, so they are neither served nor merged; the node asks its peers for the genuine claims and clears this when they are back; if no peer holds them (claims only this node had), restore %s from a backup (docs/operations.md, Damaged claims)",
			aside, truth, since.UTC().Format(time.RFC3339), latest, truth)
	case unmoved > 0:
		return fmt.Errorf("%d damaged claim rows in %s could not be set aside (the table's order is damaged): stop the node, check it with sqlite3 %s 'PRAGMA integrity_check' and restore it from a backup (docs/operations.md, Restore)",
			unmoved, truth, truth)
	}
	return s.cacheRepairHealth()
}
