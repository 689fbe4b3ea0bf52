package store

import (
	"database/sql/driver"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// haystackKeys are the merged fields free-text search looks at (with the rid).
var haystackKeys = []string{"title", "fileName", "originaltitle", "showtitle", "filePath"}

func isHaystack(key string) bool { return slices.Contains(haystackKeys, key) }

func fieldKey(rid, key string) string { return "file:" + rid + "/" + key }

// applyPhase runs the cache transaction of a batch: it updates exactly the
// merged values the truth transaction may have changed, with one event per
// change, and records how far the cache has applied truth.
func (w *writer) applyPhase(b *batch, reqs []*request) error {
	if err := w.c.exec("BEGIN IMMEDIATE"); err != nil {
		return err
	}
	w.recomputeInFull(b)
	w.planRemerge(b)
	for _, rid := range sortedKeys(b.lost) {
		if err := w.dropRecord(b, rid); err != nil {
			return err
		}
		if err := w.unhide(rid); err != nil { // a hidden group joined another
			return err
		}
	}
	if err := w.insertCBP(b.cbp); err != nil {
		return err
	}
	for _, rid := range sortedKeys(b.created) {
		if b.lost[rid] || b.full[rid] {
			continue
		}
		if err := w.createRecord(b, rid); err != nil {
			return err
		}
	}
	for _, rid := range sortedKeys(b.full) {
		if err := w.recompute(b, rid, true); err != nil {
			return err
		}
	}
	w.remerged(b)
	for _, a := range b.added {
		rid, _ := w.s.groups.ridOf(a[1]) // a later join may have moved it
		if b.created[rid] || b.full[rid] || b.lost[rid] {
			continue // written in full above
		}
		if _, err := w.cPut.exec("cid:"+a[1], rid); err != nil {
			return err
		}
		if err := w.setField(b, rid, LinkPrefix+a[1], "", false, "true", true); err != nil {
			return err
		}
	}
	if err := w.applyKeys(b); err != nil {
		return err
	}
	for _, r := range reqs {
		var err error
		switch r.kind {
		case reqFiles:
			err = w.applyFiles(b, r)
		case reqKVPut:
			_, err = w.cPut.exec(r.key, r.value)
		case reqKVDel:
			var n int64
			n, err = w.cDel.exec(r.key)
			r.existed = n > 0
		case reqRepair:
			err = w.repairRecord(b, r)
		}
		if err != nil {
			return err
		}
	}
	for _, rid := range sortedKeys(b.local) {
		if b.lost[rid] {
			continue
		}
		if err := w.refreshLocal(b, rid); err != nil {
			return err
		}
	}
	return w.finishCache(b)
}

// insertCBP adds claim_by_pid rows.
func (w *writer) insertCBP(rows []cbpRow) error {
	vals := make([]driver.Value, 0, 4*len(rows))
	for _, r := range rows {
		vals = append(vals, r.pid, r.seq, r.cid, r.key)
	}
	return execRows(w.cCBPN, w.cCBP, 4, vals)
}

// finishCache writes the search rows, counters, event bookkeeping and
// applied_seq, and commits.
func (w *writer) finishCache(b *batch) error {
	if w.s.failCache != nil {
		if err := w.s.failCache(); err != nil {
			return err
		}
	}
	for _, rid := range sortedKeys(b.fts) {
		if b.lost[rid] {
			continue
		}
		if err := w.updateFTS(b, rid); err != nil {
			return err
		}
	}
	if err := w.flushCounters(); err != nil {
		return err
	}
	if err := w.finishEvents(b); err != nil {
		return err
	}
	if _, err := w.cPut.exec("meta:applied_seq", strconv.FormatInt(w.appliedSeq(), 10)); err != nil {
		return err
	}
	if err := w.c.exec("COMMIT"); err != nil {
		return err
	}
	w.cacheBehind = false
	return nil
}

// applyKeys re-merges each (rid, key) the batch touched, except records
// recomputed in full.
func (w *writer) applyKeys(b *batch) error {
	type rk struct{ rid, key string }
	list := make([]rk, 0, len(b.keys))
	for k := range b.keys {
		if IsLinkKey(k.key) {
			continue // never merged: membership comes from cid_group
		}
		rid, ok := w.s.groups.ridOf(k.cid)
		if !ok || b.full[rid] || w.remerge.due[rid] {
			continue // recomputed in full, now or by a later chunk
		}
		list = append(list, rk{rid, k.key})
	}
	slices.SortFunc(list, func(a, b rk) int {
		if c := strings.Compare(a.rid, b.rid); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	list = slices.Compact(list)
	dest := make([]driver.Value, 1)
	for _, e := range list {
		v, has, err := w.mergedKey(b, e.rid, e.key)
		if err != nil {
			return err
		}
		old, hadOld := "", false
		if !b.created[e.rid] {
			if hadOld, err = w.cGet.one(dest, fieldKey(e.rid, e.key)); err != nil {
				return err
			}
			if hadOld {
				old = asString(dest[0])
			}
		}
		if err := w.setField(b, e.rid, e.key, old, hadOld, v, has); err != nil {
			return err
		}
	}
	return nil
}

// counts reports whether a signer's claims count (trust).
func (w *writer) counts(pid int64) bool { return w.trustedPID(pid) }

// home is the merge's view of a signer under the writer's trust view.
func (w *writer) home(pid int64) (string, bool) {
	uid := w.s.princ.uidOf(pid)
	if !w.view.trusted(uid) {
		return "", false
	}
	return w.view.homeOf(uid), true
}

// mergedKey merges one key of a record from truth (rows cached per batch).
func (w *writer) mergedKey(b *batch, rid, key string) (string, bool, error) {
	cids := w.s.groups.cidsOf(rid)
	var rows []row
	for i, cid := range cids {
		rs, err := b.load(ck{cid, key})
		if err != nil {
			return "", false, err
		}
		if i == 0 {
			rows = rs
		} else {
			rows = append(slices.Clip(rows), rs...)
		}
	}
	v, _, ok := mergeRows(rows, w.home)
	if !ok && key == "sizeByte" {
		lf, has, err := w.localFile(cids)
		if err != nil || !has {
			return "", false, err
		}
		return strconv.FormatInt(lf.Size, 10), true, nil
	}
	return v, ok, nil
}

// setField writes one merged value change and its event.
func (w *writer) setField(b *batch, rid, key, old string, hadOld bool, v string, has bool) error {
	if has == hadOld && (!has || old == v) {
		return nil
	}
	k := fieldKey(rid, key)
	typ := "set"
	if has {
		if err := w.putKV(k, v); err != nil {
			return err
		}
		w.schemaAdd(key, v, 1)
	} else {
		typ = "del"
		if _, err := w.cDel.exec(k); err != nil {
			return err
		}
	}
	if hadOld {
		w.schemaAdd(key, old, -1)
	}
	if isHaystack(key) {
		b.fts[rid] = true
		if b.created[rid] {
			b.setHay(rid, key, v, has)
		}
	}
	return w.emitMeta(b, typ, k)
}

// createRecord writes the record-level rows of a new group.
func (w *writer) createRecord(b *batch, rid string) error {
	if _, err := w.cPut.exec("idx:roots/"+rid, "1"); err != nil {
		return err
	}
	w.records++
	b.fts[rid] = true
	for _, cid := range w.s.groups.cidsOf(rid) {
		if _, err := w.cPut.exec("cid:"+cid, rid); err != nil {
			return err
		}
		if err := w.setField(b, rid, LinkPrefix+cid, "", false, "true", true); err != nil {
			return err
		}
	}
	return nil
}

// dropRecord deletes a record absorbed by a join, with a del event per key.
func (w *writer) dropRecord(b *batch, rid string) error {
	have, err := w.fields(rid)
	if err != nil {
		return err
	}
	for _, k := range sortedKeys(have) {
		if err := w.setField(b, rid, k, have[k], true, "", false); err != nil {
			return err
		}
	}
	n, err := w.cDel.exec("idx:roots/" + rid)
	if err != nil {
		return err
	}
	if n > 0 {
		w.records--
	}
	return w.dropFTS(rid)
}

// fields reads a record's merged rows from the cache. A key outside the
// range can come back when a damaged key sits out of order in the b-tree
// (a scan checks only its upper bound): it is no row of the record.
func (w *writer) fields(rid string) (map[string]string, error) {
	have := map[string]string{}
	prefix := "file:" + rid + "/"
	err := w.cRange.query(func(d []driver.Value) error {
		if f, ok := strings.CutPrefix(asString(d[0]), prefix); ok {
			have[f] = asString(d[1])
		}
		return nil
	}, prefix, "file:"+rid+"0")
	return have, err
}

// recompute merges a whole record from truth and writes the difference
// with the cache (with events when events is set).
func (w *writer) recompute(b *batch, rid string, events bool) error {
	want, described, err := w.computeRecord(rid)
	if err != nil {
		return err
	}
	if !described {
		return w.hideRecord(b, rid)
	}
	if err := w.unhide(rid); err != nil {
		return err
	}
	have, err := w.fields(rid)
	if err != nil {
		return err
	}
	dest := make([]driver.Value, 1)
	ok, err := w.cGet.one(dest, "idx:roots/"+rid)
	if err != nil {
		return err
	}
	if !ok {
		if _, err := w.cPut.exec("idx:roots/"+rid, "1"); err != nil {
			return err
		}
		w.records++
		b.fts[rid] = true
	}
	for _, cid := range w.s.groups.cidsOf(rid) {
		if _, err := w.cPut.exec("cid:"+cid, rid); err != nil {
			return err
		}
	}
	for _, k := range sortedKeys(want) {
		old, hadOld := have[k]
		if err := w.setField(b, rid, k, old, hadOld, want[k], true); err != nil {
			return err
		}
	}
	for _, k := range sortedKeys(have) {
		if _, keep := want[k]; !keep {
			if err := w.setField(b, rid, k, have[k], true, "", false); err != nil {
				return err
			}
		}
	}
	return nil
}

// computeRecord merges every key of a record from truth: the merged view
// of its votes, its cids, and the box-local fields; and whether the group
// is described at all (hidden.go).
func (w *writer) computeRecord(rid string) (map[string]string, bool, error) {
	cids := w.s.groups.cidsOf(rid)
	byKey := map[string][]row{}
	var pids []int64
	for _, cid := range cids {
		err := w.tSelCid.query(func(d []driver.Value) error {
			k, pid := asString(d[0]), asInt(d[1])
			r := rowFromValue(pid, d[2], asInt(d[3]), asID(d[4]))
			if !w.s.checked(cid, k, &r) {
				w.dmg.seen++
				return nil // damaged: never merged (damage.go)
			}
			if len(pids) == 0 || pids[len(pids)-1] != pid {
				pids = append(pids, pid)
			}
			if IsLinkKey(k) {
				return nil
			}
			byKey[k] = append(byKey[k], r)
			return nil
		}, cid)
		if err != nil {
			return nil, false, err
		}
	}
	fields := make(map[string]string, len(byKey)+len(cids)+3)
	for k, rows := range byKey {
		if v, _, ok := mergeRows(rows, w.home); ok {
			fields[k] = v
		}
	}
	for _, cid := range cids {
		fields[LinkPrefix+cid] = "true"
	}
	lf, ok, err := w.localFile(cids)
	if err != nil {
		return nil, false, err
	}
	if ok {
		fields["filePath"] = lf.Path
		fields["mtimeNano"] = strconv.FormatInt(lf.MtimeNano, 10)
		if _, signed := fields["sizeByte"]; !signed {
			fields["sizeByte"] = strconv.FormatInt(lf.Size, 10)
		}
	}
	return fields, w.described(pids, ok), nil
}

// localFile returns the lexicographically first local file holding one of
// cids.
func (w *writer) localFile(cids []string) (LocalFile, bool, error) {
	var best LocalFile
	found := false
	dest := make([]driver.Value, 3)
	for _, cid := range cids {
		ok, err := w.cLocalBy.one(dest, cid)
		if err != nil {
			return best, false, err
		}
		if ok && (!found || asString(dest[0]) < best.Path) {
			best = LocalFile{Path: asString(dest[0]), CID: cid, Size: asInt(dest[1]), MtimeNano: asInt(dest[2])}
			found = true
		}
	}
	return best, found, nil
}

// refreshLocal recomputes a record's box-local fields from local_file.
func (w *writer) refreshLocal(b *batch, rid string) error {
	cids := w.s.groups.cidsOf(rid)
	if len(cids) == 0 {
		return nil
	}
	lf, ok, err := w.localFile(cids)
	if err != nil {
		return err
	}
	if !ok || w.hidden[rid] {
		// Its last local file is gone (claims may describe it, or
		// nothing), or a file brings a hidden group back.
		return w.recompute(b, rid, true)
	}
	want := map[string]string{}
	if ok {
		want["filePath"] = lf.Path
		want["mtimeNano"] = strconv.FormatInt(lf.MtimeNano, 10)
	}
	v, has, err := w.mergedKey(b, rid, "sizeByte")
	if err != nil {
		return err
	}
	if has {
		want["sizeByte"] = v
	}
	dest := make([]driver.Value, 1)
	for _, key := range []string{"filePath", "mtimeNano", "sizeByte"} {
		hadOld, err := w.cGet.one(dest, fieldKey(rid, key))
		if err != nil {
			return err
		}
		old := ""
		if hadOld {
			old = asString(dest[0])
		}
		nv, has := want[key]
		if err := w.setField(b, rid, key, old, hadOld, nv, has); err != nil {
			return err
		}
	}
	return nil
}

// updateFTS rewrites a record's search row: its haystack fields and rid.
// A record created in this batch has no search row yet, and its haystack
// fields are the ones setField wrote in this batch (b.hay): neither is
// read back.
func (w *writer) updateFTS(b *batch, rid string) error {
	if b.created[rid] {
		return w.insertFTS(rid, haystack(rid, b.hay[rid]))
	}
	vals := map[string]string{}
	args := make([]driver.Value, len(haystackKeys))
	for i, k := range haystackKeys {
		args[i] = fieldKey(rid, k)
	}
	prefix := "file:" + rid + "/"
	err := w.cHay.query(func(d []driver.Value) error {
		vals[asString(d[0])[len(prefix):]] = asString(d[1])
		return nil
	}, args...)
	if err != nil {
		return err
	}
	hay := haystack(rid, vals)
	// An existing row is updated in place under its rowid, so idx:fts/
	// stays as it is (deleting and re-adding it dirtied its page at every
	// commit that changed a haystack field).
	dest := make([]driver.Value, 1)
	ok, err := w.cGet.one(dest, "idx:fts/"+rid)
	if err != nil {
		return err
	}
	if ok {
		n, err := w.cFTSUpd.exec(hay, parseInt(asString(dest[0])))
		if err != nil || n > 0 {
			return err
		}
	}
	return w.insertFTS(rid, hay)
}

// insertFTS adds a record's search row and its idx:fts/ rowid.
func (w *writer) insertFTS(rid, hay string) error {
	rowid, err := w.cFTSIns.execID(rid, hay)
	if err != nil {
		return err
	}
	_, err = w.cPut.exec("idx:fts/"+rid, strconv.FormatInt(rowid, 10))
	return err
}

// haystack is the text free-text search matches: the haystack fields and
// the rid, one per line.
func haystack(rid string, fields map[string]string) string {
	var sb strings.Builder
	sb.WriteString(rid)
	for _, k := range haystackKeys {
		if v, ok := fields[k]; ok {
			sb.WriteByte('\n')
			sb.WriteString(v)
		}
	}
	return sb.String()
}

func (w *writer) dropFTS(rid string) error {
	dest := make([]driver.Value, 1)
	ok, err := w.cGet.one(dest, "idx:fts/"+rid)
	if err != nil || !ok {
		return err
	}
	if _, err := w.cFTSDel.exec(parseInt(asString(dest[0]))); err != nil {
		return err
	}
	_, err = w.cDel.exec("idx:fts/" + rid)
	return err
}

// ---- counters ----

// schemaPath folds a field path for the schema counters: numeric segments
// become "*", and cids/<cid> becomes cids/* (one path, not one per cid).
func schemaPath(key string) string {
	if IsLinkKey(key) {
		return "cids/*"
	}
	segs := strings.Split(key, "/")
	changed := false
	for i, s := range segs {
		if s != "" && strings.Trim(s, "0123456789") == "" {
			segs[i], changed = "*", true
		}
	}
	if !changed {
		return key
	}
	return strings.Join(segs, "/")
}

var schemaTypes = [4]string{"string", "int", "float", "bool"}

func valueType(v string) int {
	switch {
	case v == "true" || v == "false":
		return 3
	case v == "":
		return 0
	}
	if _, err := strconv.ParseInt(v, 10, 64); err == nil {
		return 1
	}
	if _, err := strconv.ParseFloat(v, 64); err == nil && !strings.ContainsAny(v, "nNiIxXpP_") {
		return 2
	}
	return 0
}

func (w *writer) schemaAdd(key, v string, d int64) {
	p := schemaPath(key)
	c := w.schema[p]
	if c == nil {
		c = new([4]int64)
		w.schema[p] = c
	}
	c[valueType(v)] += d
	w.schemaDirty[p] = true
}

func (w *writer) flushCounters() error {
	// Only rows whose value changed are written: an unchanged counter row
	// would still dirty its page, which costs a WAL frame at every commit.
	for _, p := range sortedKeys(w.schemaDirty) {
		c := w.schema[p]
		if c == nil || c[0]+c[1]+c[2]+c[3] == 0 {
			delete(w.schema, p)
			delete(w.schemaSaved, p)
			if _, err := w.cDel.exec("idx:schema/" + p); err != nil {
				return err
			}
			continue
		}
		if old, ok := w.schemaSaved[p]; ok && old == *c {
			continue
		}
		v := fmt.Sprintf("%d %d %d %d", c[0], c[1], c[2], c[3])
		if _, err := w.cPut.exec("idx:schema/"+p, v); err != nil {
			return err
		}
		w.schemaSaved[p] = *c
	}
	clear(w.schemaDirty)
	if w.records == w.recordsSaved {
		return nil
	}
	if _, err := w.cPut.exec("idx:count/records", strconv.FormatInt(w.records, 10)); err != nil {
		return err
	}
	w.recordsSaved = w.records
	return nil
}

// forgetSavedCounters is called when counter rows are deleted in bulk
// (rebuild, clear): every counter is written again at the next flush.
func (w *writer) forgetSavedCounters() {
	w.schemaSaved = map[string][4]int64{}
	w.recordsSaved = -1
}

func parseSchemaCounts(v string) [4]int64 {
	var c [4]int64
	for i, f := range strings.Fields(v) {
		if i < 4 {
			c[i] = parseInt(f)
		}
	}
	return c
}

func schemaField(c [4]int64) SchemaField {
	f := SchemaField{Type: "mixed"}
	kinds := 0
	for i, n := range c {
		f.Count += int(n)
		if n > 0 {
			kinds++
			f.Type = schemaTypes[i]
		}
	}
	if kinds > 1 {
		f.Type = "mixed"
	}
	return f
}
