package watcher

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/metanode/metanode/store"
)

// runScanner does the initial scan (retrying with backoff until it works,
// or every rootPoll while the root is missing), closes ready, then rescans
// on the ticker or on request, one at a time.
func (w *Watcher) runScanner(ctx context.Context) error {
	backoff := time.Second
	for {
		err := w.scan(ctx, "initial scan")
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		wait := w.rootPoll() // a missing or empty root: reported by Health and logged once
		if !errors.Is(err, ErrRootMissing) {
			w.log.Error("initial scan", "err", err, "retry", backoff)
			wait = backoff
			backoff = min(2*backoff, time.Minute)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
	close(w.ready)

	var tick <-chan time.Time
	if w.cfg.Rescan > 0 {
		t := time.NewTicker(w.cfg.Rescan)
		defer t.Stop()
		tick = t.C
	}
	// While the root is missing, look for it every rootPoll (a bounded
	// stat) and rescan as soon as it is back.
	poll := time.NewTimer(time.Hour)
	poll.Stop()
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
		case <-w.rescanCh:
		case <-poll.C:
		}
		err := w.scan(ctx, "rescan")
		switch {
		case errors.Is(err, ErrRootMissing):
			poll.Reset(w.rootPoll()) // reported by Health and logged once
		case err != nil && ctx.Err() == nil:
			w.log.Warn("rescan", "err", err)
		}
	}
}

// scan walks the whole root and brings the store in line with it: changed
// and new files are hashed (unchanged ones by size and mtime are not), rows
// whose file is gone are deleted, and a new file with the size and mtime of
// a vanished one is recorded as its rename.
func (w *Watcher) scan(ctx context.Context, kind string) (err error) {
	p := w.newProgress(kind)
	defer func() {
		// A scan stopped by shutdown says so: its rows so far are kept and
		// the next start's scan does the rest, but without this line the
		// log read as if nothing had been left undone.
		if err != nil && ctx.Err() != nil {
			w.log.Info(kind+" cut short by shutdown; the next start scans the rest", "files", p.seen.Load(),
				"hashed", p.hashed.Load(), "elapsed", time.Since(p.start).Round(time.Millisecond))
		}
	}()
	if err := w.checkRoot(); err != nil {
		return err
	}
	w.mu.Lock()
	reload := !w.view.loaded || w.view.dirty
	w.mu.Unlock()
	if reload {
		if err := w.load(ctx); err != nil {
			return err
		}
	}
	if err := w.checkEmpty(); err != nil {
		return err
	}

	// Sizes and mtimes of known files: a new file matching one may be its
	// move, so it waits until the walk tells which known files vanished.
	w.mu.Lock()
	keys := make(map[statKey]int, len(w.view.known))
	for _, e := range w.view.known {
		keys[e.key()]++
	}
	w.mu.Unlock()

	seen := map[string]struct{}{}
	var batch, deferred []fileStat
	listed, err := w.walk(ctx, ".", func(f fileStat) error {
		seen[f.rel] = struct{}{}
		p.seenOne()
		w.mu.Lock()
		_, known := w.view.known[f.rel]
		unchanged := known && w.view.unchanged(f) // a row from the store learns its inode
		w.mu.Unlock()
		switch {
		case unchanged:
			return nil
		case !known && keys[f.key()] > 0:
			deferred = append(deferred, f)
			return nil
		}
		batch = append(batch, f)
		if len(batch) < hashBatch {
			return nil
		}
		err := w.settle(ctx, batch, p)
		batch = batch[:0]
		return err
	})
	if err == nil {
		err = w.settle(ctx, batch, p)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	if err := w.sweep(ctx, seen, listed.unreadable, deferred, p); err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	if n := w.pruneWatches(listed.dirs); n > 0 {
		w.log.Info("dropped watches of vanished directories; rescanning to watch their new names", "dirs", n)
		w.requestRescan()
	}
	w.mu.Lock()
	w.view.hint = nil // the walk has seen every file it could vouch for
	w.mu.Unlock()
	w.scans.Add(1)
	w.log.Info(kind+" done", "files", p.seen.Load(), "hashed", p.hashed.Load(), "bytes", p.bytes.Load(),
		"vanished", p.vanished, "unreadable", len(listed.unreadable), "elapsed", time.Since(p.start).Round(time.Millisecond))
	return nil
}

// sweep ends a scan: known files the walk did not see (and that are really
// gone now) vanish, the deferred new files are hashed and those with a
// vanished file's cid become its rename, then the rest of the vanished are
// deleted. No event says how these files vanished (the node was down, or
// events were lost) and a deleted file's inode may already be another
// file's, so only the cid pairs them: one midhash read per file moved.
func (w *Watcher) sweep(ctx context.Context, seen map[string]struct{}, unreadable []string, deferred []fileStat, p *progress) error {
	w.mu.Lock()
	t := w.view.ticket() // what the event loop decides after this is newer
	var cands []string
	for rel := range w.view.known {
		if _, ok := seen[rel]; !ok && !under(rel, unreadable) {
			cands = append(cands, rel)
		}
	}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.view.done(t)
		w.mu.Unlock()
	}()

	// Check again outside the walk: a file created after the walk passed
	// its directory is the event loop's to add, not a vanished one.
	var vanished []string
	for _, rel := range cands {
		fi, err := w.lstat(rel)
		switch {
		case err == nil && fi.Mode().IsRegular() && !ignoredRel(rel):
		case err == nil || gone(err):
			vanished = append(vanished, rel)
		default:
			w.log.Warn("stat known file; keeping it", "path", rel, "err", err)
		}
	}
	p.vanished = len(vanished)

	// Held until the deferred files are hashed: the event loop must not
	// delete them meanwhile, and may pair them itself (then they are no
	// longer gone here).
	now := time.Now()
	w.mu.Lock()
	vanished = slices.DeleteFunc(vanished, func(rel string) bool { return w.view.stale(rel, t) })
	for _, rel := range vanished {
		w.view.vanish(rel, now, false)
		if g, ok := w.view.gone[rel]; ok {
			g.held = true
			w.view.gone[rel] = g
		}
	}
	w.mu.Unlock()
	defer w.release(vanished) // on an early return: they expire as the event loop's do

	for chunk := range slices.Chunk(deferred, hashBatch) {
		if err := w.settle(ctx, chunk, p); err != nil {
			return err
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := w.commitLocked(ctx, w.deletesLocked(vanished))
	return err
}

// release lets the sweep's vanished files that are still held expire now.
func (w *Watcher) release(rels []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	for _, rel := range rels {
		if g, ok := w.view.gone[rel]; ok && g.held {
			g.held, g.due = false, now
			w.view.gone[rel] = g
		}
	}
}

// under reports whether rel lies below one of dirs.
func under(rel string, dirs []string) bool {
	for _, d := range dirs {
		if d == "." || strings.HasPrefix(rel, d+"/") {
			return true
		}
	}
	return false
}

// load replaces the view with the store's rows. Rows outside the root are
// deleted; when none is under the root (the root moved), one reset starts
// the files over instead. It holds w.mu throughout, so no change is
// committed between reading the rows and replacing the view.
func (w *Watcher) load(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	rows, err := w.cfg.Store.LocalFiles(ctx)
	if err != nil {
		return fmt.Errorf("load local files: %w", err)
	}
	select {
	case <-w.loaded:
	default:
		defer close(w.loaded)
	}
	// What the old view knew still says which cid a file of that size and
	// mtime has: after a reset behind its back (Resync), the next scan
	// adds the files again without hashing them.
	old := w.view
	w.view = newView()
	w.view.loaded = true
	w.view.seq, w.view.active = old.seq, old.active // settles in flight keep their tickets
	if old.loaded {
		w.view.hint = old.hint
		if w.view.hint == nil {
			w.view.hint = map[string]entry{}
		}
		maps.Copy(w.view.hint, old.known)
		for rel, g := range old.gone {
			w.view.hint[rel] = g.entry
		}
	}
	var stray []string
	for _, r := range rows {
		rel, ok := w.relOf(r.Path)
		if !ok || rel == "." {
			stray = append(stray, r.Path)
			continue
		}
		w.view.known[rel] = entry{cid: r.CID, size: r.Size, mtime: r.MtimeNano} // the inode is learned by the scan
	}
	if len(stray) == 0 {
		return nil
	}
	var ups []update
	if len(w.view.known) == 0 {
		w.log.Warn("no local file is under the files root; resetting local files", "rows", len(stray))
		ups = []update{{FileUpdate: store.FileUpdate{Op: store.FileReset}}}
	} else {
		w.log.Warn("deleting local files outside the files root", "rows", len(stray))
		for _, p := range stray {
			ups = append(ups, update{FileUpdate: store.FileUpdate{
				Op:        store.FileDelete,
				File:      store.LocalFile{Path: p},
				EventPath: filepath.ToSlash(p),
			}})
		}
	}
	_, err = w.commitLocked(ctx, ups)
	return err
}

// walk lists the tree below dir (relative), watching each directory before
// reading it, and calls file for every regular file not ignored. It skips
// symlinks and returns the directories it could not read (their known files
// must not count as vanished) and the directories it listed (pruneWatches).
// An unreadable starting directory is an error.
//
// Each directory is opened from its parent's open handle by name, and
// held while its subdirectories are walked (as many handles as the tree
// is deep): a walk costs the same per directory at any depth.
func (w *Watcher) walk(ctx context.Context, dir string, file func(fileStat) error) (listed walked, err error) {
	d, err := w.openDir(dir)
	if err != nil {
		return listed, fmt.Errorf("read %s: %w", dir, err)
	}
	defer d.Close()
	listed.dirs = map[string]struct{}{}
	entries, err := w.list(d, dir)
	if err != nil {
		return listed, fmt.Errorf("read %s: %w", dir, err)
	}
	listed.dirs[dir] = struct{}{}
	return listed, w.walkEntries(ctx, d, dir, entries, file, &listed)
}

// walked is what a walk saw of the directories.
type walked struct {
	unreadable []string            // directories it could not read
	dirs       map[string]struct{} // directories it listed
}

// walkEntries handles the entries of directory rel (open as d): files
// first, then each subdirectory in turn.
func (w *Watcher) walkEntries(ctx context.Context, d *os.Root, rel string, entries []fs.DirEntry, file func(fileStat) error, listed *walked) error {
	var subdirs []string
	for _, e := range entries {
		name := e.Name()
		if ignoredName(name, e.IsDir()) {
			continue
		}
		child := joinRel(rel, name)
		switch t := e.Type(); {
		case t&fs.ModeSymlink != 0:
			w.log.Debug("skip symlink", "path", child)
		case t.IsDir():
			subdirs = append(subdirs, name)
		case t.IsRegular():
			fi, err := e.Info()
			if err != nil {
				continue // removed since the listing
			}
			id := idOf(fi)
			if err := file(fileStat{rel: child, size: fi.Size(), mtime: fi.ModTime().UnixNano(), id: id,
				inodeSays: id.known() && w.stableInodes(id.dev, rel)}); err != nil {
				return err
			}
		}
	}
	for _, name := range subdirs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := w.walkSubdir(ctx, d, joinRel(rel, name), name, file, listed); err != nil {
			return err
		}
	}
	return nil
}

// walkSubdir opens, lists and walks the subdirectory name of d (rel from
// the root). One that cannot be read is logged and listed as unreadable.
func (w *Watcher) walkSubdir(ctx context.Context, d *os.Root, rel, name string, file func(fileStat) error, listed *walked) error {
	sub, err := w.openChild(d, name)
	var entries []fs.DirEntry
	if err == nil {
		defer sub.Close()
		entries, err = w.list(sub, rel)
	}
	if err != nil {
		if !gone(err) {
			w.log.Warn("read directory", "path", rel, "err", err)
			listed.unreadable = append(listed.unreadable, rel)
		}
		return nil
	}
	listed.dirs[rel] = struct{}{}
	return w.walkEntries(ctx, sub, rel, entries, file, listed)
}

// list watches directory rel (open as d) and lists it.
func (w *Watcher) list(d *os.Root, rel string) ([]fs.DirEntry, error) {
	w.addWatch(rel)
	f, err := d.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// stableInodes reports whether the file system of device dev (dir, relative
// to the root, is on it) keeps a file's inode for its life, so a scan may
// take another inode at a known path as another file. Cached per device.
func (w *Watcher) stableInodes(dev uint64, dir string) bool {
	if v, ok := w.stableDevs.Load(dev); ok {
		return v.(bool)
	}
	stable := !renumbersInodes(filepath.Join(w.rootAbs, filepath.FromSlash(dir)))
	w.stableDevs.Store(dev, stable)
	return stable
}
