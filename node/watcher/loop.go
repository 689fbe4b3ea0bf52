package watcher

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"
)

// runLoop turns fsnotify events into debounced work: each event (re)sets
// its path's deadline to now+Debounce, and when the timer fires the paths
// whose deadline passed are looked at together. A queue overflow, in the
// kernel or in pending, falls back to a rescan.
func (w *Watcher) runLoop(ctx context.Context) error {
	pending := map[string]pend{}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	armed := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return nil
			}
			w.note(ev, pending)
			if len(pending) > maxPending {
				w.log.Warn("too many changes at once; rescanning instead", "paths", len(pending))
				clear(pending)
				w.requestRescan()
			}
			if !armed && len(pending) > 0 {
				timer.Reset(w.cfg.Debounce)
				armed = true
			}
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return nil
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				w.log.Warn("file events overflowed; rescanning")
				w.requestRescan()
			} else {
				w.log.Warn("file events", "err", err)
			}
		case <-timer.C:
			armed = false
			select {
			case <-w.loaded:
			default:
				// Classifying before the rows are loaded would take every
				// file for new: wait for the initial scan to load them.
				timer.Reset(w.cfg.Debounce)
				armed = true
				continue
			}
			w.flush(ctx, pending)
			if next, ok := w.nextWake(pending); ok {
				timer.Reset(max(time.Until(next), time.Millisecond))
				armed = true
			}
		}
	}
}

// pend is one path waiting in the debounce.
type pend struct {
	deadline time.Time
	// removed: the last event said the path went away (remove or rename).
	// Such a path is looked at by the next flush even before its deadline,
	// so a moved file or directory vanishes before its new name is seen:
	// the kernel may report a directory's own move after its new name.
	removed bool
	// What happened to the name since it was last looked at: renamed away,
	// unlinked, made anew. They tell a move (its inode lives on, a file
	// with it is this one) from a delete (its inode may be reused at once
	// by another file), and whether a file there now is still the one its
	// row describes.
	renamed, unlinked, created bool
	// written: the file was written in place; same size and mtime then
	// mean a restored mtime (cp -p over it), not an unchanged file.
	written bool
}

// moved reports whether a vanished path's file was moved, not deleted or
// replaced first.
func (p pend) moved() bool { return p.renamed && !p.unlinked && !p.created }

// relinked reports whether the name was removed or renamed away: a file
// there now is another directory entry, whatever its size, mtime or inode.
func (p pend) relinked() bool { return p.renamed || p.unlinked }

// note records one event. A new directory is not watched here but when its
// flush lists it, after the watches of whatever vanished were dropped: a
// directory moved inside the root keeps its kernel watch, which fsnotify
// would go on reporting under the old name.
func (w *Watcher) note(ev fsnotify.Event, pending map[string]pend) {
	rel, ok := w.relOf(ev.Name)
	if !ok {
		return
	}
	if rel == "." {
		if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
			// The scanner's checkRoot reports it and waits for it.
			w.log.Warn("files root removed or moved", "root", w.rootAbs)
			w.requestRescan()
		}
		return
	}
	if w.rootLost.Load() {
		return // the rescan when the root is back catches up
	}
	if ev.Has(fsnotify.Remove) {
		w.unlinked = true // before the ignore: a hidden name's delete frees an inode too
	}
	if ignoredRel(rel) {
		return
	}
	prev := pending[rel]
	pending[rel] = pend{
		deadline: time.Now().Add(w.cfg.Debounce),
		removed:  ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename),
		renamed:  prev.renamed || ev.Has(fsnotify.Rename),
		unlinked: prev.unlinked || ev.Has(fsnotify.Remove),
		created:  prev.created || ev.Has(fsnotify.Create),
		written:  prev.written || ev.Has(fsnotify.Write),
	}
}

// nextWake is the earliest pending deadline or vanished-file due time.
func (w *Watcher) nextWake(pending map[string]pend) (time.Time, bool) {
	next, ok := w.nextGoneDue()
	for _, p := range pending {
		if !ok || p.deadline.Before(next) {
			next, ok = p.deadline, true
		}
	}
	return next, ok
}

// flush looks at every path whose deadline passed: vanished ones first (so
// a moved file's new name finds its old one), then directories (listed)
// and files (hashed when changed), then deletes vanished files whose wait
// for a rename partner is over.
func (w *Watcher) flush(ctx context.Context, pending map[string]pend) {
	now := time.Now()
	// A deleted root sends no event of its own while the watcher holds it
	// open (the kernel keeps the directory until the handle is closed):
	// one stat per flush notices it after the events of what was in it.
	if !w.rootLost.Load() {
		fi, err := os.Stat(w.rootAbs)
		if err != nil {
			w.requestRescan() // the scanner's checkRoot reports it
		} else if root := w.rootFS(); root == nil {
			w.requestRescan() // not opened yet: checkRoot opens it
		} else if cur, err := root.Stat("."); err != nil || !os.SameFile(cur, fi) {
			w.requestRescan() // deleted and made again: checkRoot reopens it
		}
	}
	var due []string
	what := map[string]pend{}
	for rel, p := range pending {
		if !p.deadline.After(now) {
			due = append(due, rel)
		} else if p.removed {
			if _, err := w.lstat(rel); gone(err) {
				due = append(due, rel)
			}
		}
	}
	for _, rel := range due {
		what[rel] = pending[rel]
		delete(pending, rel)
	}
	slices.Sort(due)

	var missing, dirs []string
	var files []fileStat
	for _, rel := range due {
		fi, err := w.lstat(rel)
		switch {
		case err != nil && gone(err):
			missing = append(missing, rel)
		case err != nil:
			w.log.Warn("stat changed path", "path", rel, "err", err)
		case fi.IsDir():
			dirs = append(dirs, rel)
		case fi.Mode().IsRegular():
			files = append(files, fileStat{rel: rel, size: fi.Size(), mtime: fi.ModTime().UnixNano(),
				id: idOf(fi), relinked: what[rel].relinked() || what[rel].written, inodeSays: true})
		default:
			// A symlink or special file now: its row, if any, must go.
			w.log.Debug("skip non-regular file", "path", rel, "mode", fi.Mode().Type())
			missing = append(missing, rel)
		}
	}

	// Each path vanishes as its own events say (moved or deleted), then
	// what was below a vanished directory as the directory's say.
	hold := now.Add(w.cfg.Debounce)
	var goneDirs []string
	for _, rel := range missing {
		if w.dropWatches(rel) {
			goneDirs = append(goneDirs, rel)
		}
		w.mu.Lock()
		w.view.vanish(rel, hold, what[rel].moved())
		w.mu.Unlock()
	}
	for _, d := range slices.Backward(goneDirs) { // the nearest directory's events win
		w.mu.Lock()
		w.view.vanishUnder(d, hold, what[d].moved())
		w.mu.Unlock()
	}
	if w.unlinked {
		// Something was deleted since the last flush, maybe a moved file
		// at its new name: its inode may be another file's now.
		w.unlinked = false
		w.mu.Lock()
		for rel, g := range w.view.gone {
			g.moved = false
			w.view.gone[rel] = g
		}
		w.mu.Unlock()
	}
	// A new tree shows up as events for the directory and for what is in
	// it: list only the topmost directories, and look at each file once.
	listed := map[string]bool{}
	for _, f := range files {
		listed[f.rel] = true
	}
	var found []fileStat
	for i, d := range dirs {
		if i > 0 && under(d, dirs[:i]) {
			continue // dirs is sorted: an ancestor came first
		}
		_, err := w.walk(ctx, d, func(f fileStat) error {
			if !listed[f.rel] {
				listed[f.rel] = true
				found = append(found, f)
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) && ctx.Err() == nil {
			w.log.Warn("list new directory", "path", d, "err", err)
		}
	}
	// Files found by listing have not been quiet for a debounce yet (cp -r
	// fills a directory it has just made): a move pairs with its vanished
	// row at once, anything to hash waits in the debounce like a file
	// written in a known directory, so a file still growing is never
	// published half written.
	for chunk := range slices.Chunk(found, hashBatch) {
		need, err := w.renameOrWait(ctx, chunk)
		if err != nil {
			w.logApply(ctx, err)
			return
		}
		for _, f := range need {
			pending[f.rel] = pend{deadline: now.Add(w.cfg.Debounce)}
		}
	}
	for chunk := range slices.Chunk(files, hashBatch) {
		if err := w.settle(ctx, chunk, nil); err != nil {
			w.logApply(ctx, err)
			return
		}
	}
	if err := w.expireGone(ctx, now); err != nil {
		w.logApply(ctx, err)
	}
}

// logApply reports a failed store write and asks for a rescan, which
// reloads the view from the store and retries.
func (w *Watcher) logApply(ctx context.Context, err error) {
	if ctx.Err() == nil {
		w.log.Error("apply file changes; rescanning", "err", err)
		w.requestRescan()
	}
}
