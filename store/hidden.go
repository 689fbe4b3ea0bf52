package store

import (
	"database/sql/driver"
	"strings"
)

// Hidden groups. A group stays in truth for as long as claims name its
// cids, but it is a record (rows in the cache, listed, found by cid or
// rid, searched) only while something counted describes it: a claim of a
// signer whose votes count (any key, a retraction included) on one of its
// cids, or a local file. Otherwise — every claim about it comes from
// signers that are no longer trusted, or a split left a link target on its
// own — it is hidden: the cache keeps only idx:hidden/<rid>, so that a
// later claim, trust or file about it brings it back in full. Without
// this, distrusting a vandal left one empty record per cid it had named.

// described reports whether a group's truth rows and local files make it a
// record (see above). rows are the group's claims as (key, pid) pairs.
func (w *writer) described(pids []int64, hasLocal bool) bool {
	if hasLocal {
		return true
	}
	for _, p := range pids {
		if w.counts(p) {
			return true
		}
	}
	return false
}

// hideRecord takes a group out of the records: a del event per row it had,
// no idx:roots, cid: or search rows.
func (w *writer) hideRecord(b *batch, rid string) error {
	if err := w.dropRecord(b, rid); err != nil {
		return err
	}
	delete(b.fts, rid)
	for _, cid := range w.s.groups.cidsOf(rid) {
		if _, err := w.cDel.exec("cid:" + cid); err != nil {
			return err
		}
	}
	if w.hidden[rid] {
		return nil
	}
	if _, err := w.cPut.exec("idx:hidden/"+rid, "1"); err != nil {
		return err
	}
	w.hidden[rid] = true
	return nil
}

// unhide forgets that rid was hidden (its record is being written).
func (w *writer) unhide(rid string) error {
	if !w.hidden[rid] {
		return nil
	}
	if _, err := w.cDel.exec("idx:hidden/" + rid); err != nil {
		return err
	}
	delete(w.hidden, rid)
	return nil
}

// recomputeInFull picks the records a batch must recompute in full rather
// than key by key, because whether they are described may have changed:
// every record a batch touched while its trust view changed, and a hidden
// group a claim touches (written back when it is described now;
// refreshLocal does the same for a local file). The view changing is
// enough, even when the trusted set is the same at both ends: a signer
// vouched for and unvouched within one batch had its claims stored in
// between, and a group only those describe is hidden, as a rebuild makes it.
func (w *writer) recomputeInFull(b *batch) {
	if len(w.hidden) == 0 && !b.viewChanged {
		return
	}
	for k := range b.keys {
		if rid, ok := w.s.groups.ridOf(k.cid); ok && (b.viewChanged || w.hidden[rid]) {
			b.full[rid] = true
		}
	}
	for cid := range b.revoted {
		if rid, ok := w.s.groups.ridOf(cid); ok {
			b.full[rid] = true
		}
	}
}

// loadHidden reads the hidden groups at boot.
func (w *writer) loadHidden() error {
	w.hidden = map[string]bool{}
	return w.c.queryOnce(`SELECT k FROM kv WHERE k >= 'idx:hidden/' AND k < 'idx:hidden0'`, func(d []driver.Value) error {
		w.hidden[strings.TrimPrefix(asString(d[0]), "idx:hidden/")] = true
		return nil
	})
}
