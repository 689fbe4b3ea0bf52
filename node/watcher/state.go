package watcher

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/metanode/metanode/store"
)

// fileID is a file's device and inode (zero: unknown). Only the view keeps
// it, never the store: an inode means nothing after a restore or a restart
// on another filesystem.
type fileID struct{ dev, ino uint64 }

func (i fileID) known() bool { return i != fileID{} }

// fileStat is what a directory listing or lstat says about a regular file.
// rel is relative to the root, with "/" separators.
type fileStat struct {
	rel   string
	size  int64
	mtime int64 // nanoseconds
	id    fileID
	// relinked: an event said the name was removed or renamed away since
	// it was last looked at, so what is there now is another directory
	// entry, possibly another file on a freed inode reused at once (ext4
	// does): its size, mtime and inode prove nothing, it is hashed.
	relinked bool
	// inodeSays: another inode at a known path means another file. So it
	// does when an event (or a register) brought the look, and in a scan
	// of a file system that keeps a file's inode for its life; not in a
	// scan of one that numbers inodes anew once its cache forgets a file
	// (FUSE mounts such as rclone's, SMB/CIFS: fileid_linux.go), where a
	// rescan would otherwise hash every file of the library each time.
	inodeSays bool
}

func (f fileStat) key() statKey { return statKey{f.size, f.mtime} }

// hashedFile is a fileStat with its midhash256, size, mtime and inode as
// read from the open file.
type hashedFile struct {
	fileStat
	cid string
}

// entry is the watcher's copy of one local_file row, plus the file's
// inode when the view has seen it (rows loaded from the store learn it
// when the scan finds them unchanged).
type entry struct {
	cid   string
	size  int64
	mtime int64
	id    fileID
}

func (e entry) key() statKey { return statKey{e.size, e.mtime} }

// same reports whether f looks unchanged since e was hashed: the rule that
// saves re-hashing. Same size and mtime, and, where the inode says (see
// fileStat.inodeSays), the same inode when both are known: a file
// replaced by another (cp -p, tar x, rsync -t) keeps size and mtime but
// not the inode.
func (e entry) same(f fileStat) bool {
	return e.size == f.size && e.mtime == f.mtime && !f.relinked &&
		(!f.inodeSays || !e.id.known() || !f.id.known() || e.id == f.id)
}

// sameRow reports whether two entries make the same row (the inode is the
// view's own).
func (e entry) sameRow(o entry) bool { return e.cid == o.cid && e.size == o.size && e.mtime == o.mtime }

// statKey indexes vanished files by what a move keeps: size and mtime.
type statKey struct{ size, mtime int64 }

// vanished is a known file that disappeared; it waits until due for the
// file it was moved to before it is deleted.
type vanished struct {
	entry
	due time.Time
	// moved: an event said its name was renamed away, and none that it was
	// deleted or made anew, so its inode lives on elsewhere and a file with
	// that inode (and size and mtime) is this one, moved. A deleted file's
	// inode may be reused at once by another file.
	moved bool
	// held: vanished in a scan's sweep, which deletes it itself once the
	// new files that may be its move are hashed; it does not expire.
	held bool
}

// movedTo reports whether f is this vanished file itself, moved (or moved
// back): no hashing needed.
func (g vanished) movedTo(f fileStat) bool {
	return g.moved && g.id.known() && g.id == f.id && g.size == f.size && g.mtime == f.mtime && !f.relinked
}

// view is the watcher's copy of the rows under the root. Guarded by
// Watcher.mu.
type view struct {
	known  map[string]entry    // rel → row
	gone   map[string]vanished // rel → vanished row, not yet deleted in the store
	byKey  map[statKey][]string
	loaded bool // known was read from the store
	// hint is what a view replaced by a reload knew (path → row), until
	// the next scan ends: a file still matching its size and mtime is
	// added again with that cid, unhashed.
	hint  map[string]entry
	dirty bool // a commit failed: reload from the store at the next scan

	// Settles hash outside the lock, so a scan's result can arrive after
	// the event loop has seen the file change again or vanish. Every
	// settle takes a ticket when it lists its files, and every decision
	// about a path records the ticket it was made with: a result whose
	// ticket is older than the path's last decision is stale and dropped.
	seq     uint64
	decided map[string]uint64 // rel → ticket of the last decision about it
	active  map[uint64]int    // tickets of the settles in flight
}

func newView() view {
	return view{known: map[string]entry{}, gone: map[string]vanished{}, byKey: map[statKey][]string{},
		decided: map[string]uint64{}, active: map[uint64]int{}}
}

// ticket starts a settle: decisions made after it are newer than its
// listing.
func (v *view) ticket() uint64 {
	v.seq++
	v.active[v.seq]++
	return v.seq
}

// done ends a settle's ticket and forgets decisions no settle in flight
// can be older than (so decided stays about as big as the tree).
func (v *view) done(t uint64) {
	if v.active[t]--; v.active[t] <= 0 {
		delete(v.active, t)
	}
	if len(v.decided) < 4096 || len(v.decided) < 2*(len(v.known)+len(v.gone)) {
		return
	}
	oldest := v.seq + 1
	for a := range v.active {
		oldest = min(oldest, a)
	}
	for rel, d := range v.decided {
		if d < oldest {
			delete(v.decided, rel)
		}
	}
}

// stale reports whether a decision about rel made with ticket t would
// undo a newer one.
func (v *view) stale(rel string, t uint64) bool { return v.decided[rel] > t }

// vanish moves a known file to gone; moved says an event showed its name
// renamed away (see vanished.moved).
func (v *view) vanish(rel string, due time.Time, moved bool) {
	e, ok := v.known[rel]
	if !ok {
		return
	}
	v.seq++
	v.decided[rel] = v.seq // newer than any settle listed before
	delete(v.known, rel)
	v.gone[rel] = vanished{entry: e, due: due, moved: moved}
	v.byKey[e.key()] = append(v.byKey[e.key()], rel)
}

// vanishUnder moves every known file below dir to gone.
func (v *view) vanishUnder(dir string, due time.Time, moved bool) {
	prefix := dir + "/"
	for rel := range v.known {
		if strings.HasPrefix(rel, prefix) {
			v.vanish(rel, due, moved)
		}
	}
}

// unchanged reports whether f matches its row (entry.same); a row loaded
// from the store then learns the file's inode, so its later move pairs
// without hashing.
func (v *view) unchanged(f fileStat) bool {
	e, ok := v.known[f.rel]
	if !ok || !e.same(f) {
		return false
	}
	if f.id.known() && e.id != f.id { // learned, or numbered anew (see fileStat.inodeSays)
		e.id = f.id
		v.known[f.rel] = e
	}
	return true
}

// unGone forgets a vanished file (it came back, or was paired or deleted).
func (v *view) unGone(rel string) (vanished, bool) {
	g, ok := v.gone[rel]
	if !ok {
		return g, false
	}
	delete(v.gone, rel)
	k := g.key()
	rels := slices.DeleteFunc(v.byKey[k], func(r string) bool { return r == rel })
	if len(rels) == 0 {
		delete(v.byKey, k)
	} else {
		v.byKey[k] = rels
	}
	return g, true
}

// movedFrom finds the vanished file that f is, moved: the same inode,
// size and mtime, its name renamed away. ok is false when there is none;
// f must then be hashed to tell.
func (v *view) movedFrom(f fileStat) (string, bool) {
	if !f.id.known() {
		return "", false
	}
	for _, r := range v.byKey[f.key()] {
		if v.gone[r].movedTo(f) {
			return r, true
		}
	}
	return "", false
}

// sameContent finds the vanished file a hashed file was moved from: same
// size, mtime and cid, preferring the same base name; one that vanished
// after ticket t is left to the settle that saw it vanish.
func (v *view) sameContent(h hashedFile, t uint64) (string, bool) {
	var rels []string
	for _, r := range v.byKey[h.key()] {
		if v.gone[r].cid == h.cid && !v.stale(r, t) {
			rels = append(rels, r)
		}
	}
	if len(rels) == 0 {
		return "", false
	}
	base := baseName(h.rel)
	for _, r := range rels {
		if baseName(r) == base {
			return r, true
		}
	}
	return slices.Min(rels), true
}

// classifyLocked sorts files present on disk into updates that need no
// hashing (moves of the same inode) and files that must be hashed.
// Unchanged files drop out. Caller holds w.mu.
func (w *Watcher) classifyLocked(files []fileStat, t uint64) (ups []update, need []fileStat) {
	v := &w.view
	for _, f := range files {
		if v.stale(f.rel, t) {
			continue // listed before the event loop's last look at it
		}
		v.decided[f.rel] = t
		if _, ok := v.known[f.rel]; ok {
			if !v.unchanged(f) {
				need = append(need, f)
			}
			continue
		}
		if g, ok := v.gone[f.rel]; ok {
			// Back at the same path before its delete was sent: the same
			// file only if it is the same inode, moved away and back.
			if g.movedTo(f) {
				v.unGone(f.rel)
				v.known[f.rel] = g.entry
			} else {
				need = append(need, f)
			}
			continue
		}
		if old, ok := v.movedFrom(f); ok {
			g, _ := v.unGone(old)
			v.decided[old] = t
			ups = append(ups, w.renameUpdate(old, f.rel, g.entry))
			continue
		}
		if h, ok := v.hint[f.rel]; ok && h.same(f) {
			delete(v.hint, f.rel)
			h.id = f.id
			ups = append(ups, w.fileUpdate(store.FileAdd, f.rel, h))
			continue
		}
		need = append(need, f)
	}
	return ups, need
}

// decideLocked turns hashed files into add/change/rename updates, dropping
// those that turn out to be unchanged. Caller holds w.mu.
func (w *Watcher) decideLocked(files []hashedFile, t uint64) []update {
	v := &w.view
	var ups []update
	for _, h := range files {
		if v.stale(h.rel, t) {
			continue // the file changed or vanished again while this was hashed
		}
		e := entry{h.cid, h.size, h.mtime, h.id}
		if k, ok := v.known[h.rel]; ok {
			if k.sameRow(e) {
				v.known[h.rel] = e // same row; the inode may be new
			} else {
				ups = append(ups, w.fileUpdate(store.FileChange, h.rel, e))
			}
			continue
		}
		if g, ok := v.unGone(h.rel); ok {
			if g.sameRow(e) {
				v.known[h.rel] = e
			} else {
				ups = append(ups, w.fileUpdate(store.FileChange, h.rel, e))
			}
			continue
		}
		// Moved from a path that vanished, as its cid says: a move the
		// inode could not vouch for (the node was down, events were lost,
		// or the old name's event was a delete).
		if old, ok := v.sameContent(h, t); ok {
			v.unGone(old)
			ups = append(ups, w.renameUpdate(old, h.rel, e))
			continue
		}
		ups = append(ups, w.fileUpdate(store.FileAdd, h.rel, e))
	}
	return ups
}

// settle brings the store in line with files present on disk: renames
// first, then hashing (outside the lock) and add/change.
func (w *Watcher) settle(ctx context.Context, files []fileStat, p *progress) error {
	if len(files) == 0 {
		return nil
	}
	w.mu.Lock()
	t := w.view.ticket()
	ups, need := w.classifyLocked(files, t)
	_, err := w.commitLocked(ctx, ups)
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.view.done(t)
		w.mu.Unlock()
	}()
	if err != nil {
		return err
	}
	hashed := w.hashAll(ctx, need, p)
	if len(hashed) == 0 {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err = w.commitLocked(ctx, w.decideLocked(hashed, t))
	return err
}

// renameOrWait applies what needs no hashing among files just found by
// listing a new directory (moves of vanished files) and returns the files
// that must be hashed, which the caller puts on the debounce.
func (w *Watcher) renameOrWait(ctx context.Context, files []fileStat) ([]fileStat, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.view.ticket()
	defer w.view.done(t)
	ups, need := w.classifyLocked(files, t)
	_, err := w.commitLocked(ctx, ups)
	return need, err
}

// expireGone deletes the vanished files due by now that found no partner.
func (w *Watcher) expireGone(ctx context.Context, now time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var rels []string
	for rel, g := range w.view.gone {
		if !g.held && !g.due.After(now) {
			rels = append(rels, rel)
		}
	}
	_, err := w.commitLocked(ctx, w.deletesLocked(rels))
	return err
}

// deletesLocked forgets vanished files and returns their delete updates.
func (w *Watcher) deletesLocked(rels []string) []update {
	slices.Sort(rels)
	ups := make([]update, 0, len(rels))
	for _, rel := range rels {
		if _, ok := w.view.unGone(rel); ok {
			ups = append(ups, update{FileUpdate: store.FileUpdate{
				Op:        store.FileDelete,
				File:      store.LocalFile{Path: w.absOf(rel)},
				EventPath: rel,
			}})
		}
	}
	return ups
}

// nextGoneDue is the earliest due time among vanished files (held ones
// wait for their sweep, not a time).
func (w *Watcher) nextGoneDue() (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var first time.Time
	for _, g := range w.view.gone {
		if !g.held && (first.IsZero() || g.due.Before(first)) {
			first = g.due
		}
	}
	return first, !first.IsZero()
}

// update is a store update and the file's inode, which the view keeps and
// the store does not.
type update struct {
	store.FileUpdate
	id fileID
}

// commitLocked applies updates in bounded transactions and, once the store
// has them, records them in the view. On failure the view may no longer
// match the store, so the next scan reloads it. Caller holds w.mu.
func (w *Watcher) commitLocked(ctx context.Context, ups []update) ([]store.FileResult, error) {
	var out []store.FileResult
	for chunk := range slices.Chunk(ups, applyBatch) {
		batch := make([]store.FileUpdate, len(chunk))
		for i, u := range chunk {
			batch[i] = u.FileUpdate
		}
		res, err := w.cfg.Store.ApplyFiles(ctx, batch)
		if err != nil {
			w.view.dirty = true
			return out, fmt.Errorf("apply %d file updates: %w", len(chunk), err)
		}
		for _, u := range chunk {
			w.record(u)
		}
		w.applied.Add(int64(len(chunk)))
		out = append(out, res...)
	}
	return out, nil
}

// record mirrors one applied update in the view.
func (w *Watcher) record(u update) {
	v := &w.view
	switch u.Op {
	case store.FileAdd, store.FileChange:
		v.known[u.EventPath] = entry{u.File.CID, u.File.Size, u.File.MtimeNano, u.id}
	case store.FileRename:
		delete(v.known, u.EventOld)
		v.known[u.EventPath] = entry{u.File.CID, u.File.Size, u.File.MtimeNano, u.id}
	case store.FileDelete:
		delete(v.known, u.EventPath)
	case store.FileReset:
		clear(v.known)
	}
	w.log.Debug("file applied", "op", u.Op, "path", u.EventPath, "old", u.EventOld)
}

func (w *Watcher) fileUpdate(op store.FileOp, rel string, e entry) update {
	return update{FileUpdate: store.FileUpdate{
		Op:        op,
		File:      store.LocalFile{Path: w.absOf(rel), CID: e.cid, Size: e.size, MtimeNano: e.mtime},
		EventPath: rel,
	}, id: e.id}
}

func (w *Watcher) renameUpdate(oldRel, rel string, e entry) update {
	u := w.fileUpdate(store.FileRename, rel, e)
	u.OldPath = w.absOf(oldRel)
	u.EventOld = oldRel
	return u
}
