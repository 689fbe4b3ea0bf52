package watcher

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/metanode/metanode/store"
)

// Register hashes the file at rel (relative to the root, "/"-separated) and
// records it at once, for POST /api/files/register. Created is false when
// the same path with the same midhash was already known (then nothing is
// written when size and mtime match too), true otherwise. A missing file
// gives an error wrapping fs.ErrNotExist; a directory, a symlink, an
// ignored name or a path leaving the root one wrapping store.ErrBadPath;
// while the root is missing, and for a missing file while the root is
// empty with files indexed (checkEmpty), one wrapping ErrRootMissing and
// store.ErrUnavailable (try again later).
func (w *Watcher) Register(ctx context.Context, rel string) (store.LocalFile, store.FileResult, error) {
	if !w.live() {
		return store.LocalFile{}, store.FileResult{}, ErrClosed
	}
	clean, err := cleanRel(rel)
	if err != nil {
		return store.LocalFile{}, store.FileResult{}, fmt.Errorf("register %q: %w", rel, err)
	}
	// A missing root is no missing file (404) but the node unable to look:
	// the handle of a root moved away would even read the moved directory.
	if w.rootLost.Load() {
		return store.LocalFile{}, store.FileResult{}, fmt.Errorf("register %s: %w", clean, w.errMissing())
	}
	f, err := w.registrable(clean)
	if errors.Is(err, fs.ErrNotExist) && w.rootEmpty.Load() > 0 {
		// Not there because the root is empty (a share not mounted):
		// unavailable as while the root is missing. A file that is there
		// ends that state, and is registered.
		err = w.errMissing()
	}
	if err != nil {
		return store.LocalFile{}, store.FileResult{}, fmt.Errorf("register %s: %w", clean, err)
	}
	// Whether the path is known needs the rows (the initial scan's first
	// step, quick next to the scan itself).
	select {
	case <-w.loaded:
	case <-ctx.Done():
		return store.LocalFile{}, store.FileResult{}, fmt.Errorf("register %s: %w", clean, ctx.Err())
	case <-w.ctx.Done():
		return store.LocalFile{}, store.FileResult{}, ErrClosed
	}

	// Unchanged since it was hashed: answer without hashing or writing.
	w.mu.Lock()
	e, known := w.view.known[clean]
	t := w.view.ticket()
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.view.done(t)
		w.mu.Unlock()
	}()
	if known && e.same(f) {
		rid, err := w.cfg.Store.Resolve(ctx, e.cid)
		if err == nil {
			return w.localFile(clean, e), store.FileResult{RID: rid}, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return store.LocalFile{}, store.FileResult{}, fmt.Errorf("register %s: %w", clean, err)
		}
	}

	h, err := w.hashFile(clean)
	if err != nil {
		if errors.Is(err, errLinked) || errors.Is(err, errNotRegular) {
			err = fmt.Errorf("%w: %w", store.ErrBadPath, err)
		}
		return store.LocalFile{}, store.FileResult{}, fmt.Errorf("register %s: %w", clean, err)
	}
	e = entry{h.cid, h.size, h.mtime, h.id}

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.view.stale(clean, t) {
		// The event loop saw the file change or vanish while this hashed
		// it: its view is newer, answer with it.
		cur, ok := w.view.known[clean]
		if !ok {
			return store.LocalFile{}, store.FileResult{}, fmt.Errorf("register %s: %w: it vanished while being hashed", clean, store.ErrNotFound)
		}
		rid, err := w.cfg.Store.Resolve(ctx, cur.cid)
		if err != nil {
			return store.LocalFile{}, store.FileResult{}, fmt.Errorf("register %s: %w", clean, err)
		}
		return w.localFile(clean, cur), store.FileResult{RID: rid}, nil
	}
	w.view.decided[clean] = t
	prev, known := w.view.known[clean]
	op := store.FileAdd
	switch g, wasGone := w.view.unGone(clean); {
	case known:
		op = store.FileChange
	case wasGone:
		prev, known, op = g.entry, true, store.FileChange
	}
	if known && prev.sameRow(e) {
		// The event loop got there first (or it came back unchanged).
		w.view.known[clean] = e
		rid, err := w.cfg.Store.Resolve(ctx, e.cid)
		if err == nil {
			return w.localFile(clean, e), store.FileResult{RID: rid}, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return store.LocalFile{}, store.FileResult{}, fmt.Errorf("register %s: %w", clean, err)
		}
	}
	res, err := w.commitLocked(ctx, []update{w.fileUpdate(op, clean, e)})
	if err != nil {
		return store.LocalFile{}, store.FileResult{}, fmt.Errorf("register %s: %w", clean, err)
	}
	// Created as the api means it: not "this path had no row" (the store's
	// answer) but "this path with this midhash was not known".
	r := res[0]
	r.Created = !known || prev.cid != e.cid
	return w.localFile(clean, e), r, nil
}

// registrable checks that rel is a regular file reached without symlinks.
func (w *Watcher) registrable(rel string) (fileStat, error) {
	fi, err := w.lstat(rel)
	switch {
	case errors.Is(err, errLinked):
		return fileStat{}, fmt.Errorf("%w: %w", store.ErrBadPath, err)
	case err != nil:
		return fileStat{}, err
	case fi.IsDir():
		return fileStat{}, fmt.Errorf("%w: is a directory", store.ErrBadPath)
	case !fi.Mode().IsRegular():
		return fileStat{}, fmt.Errorf("%w: %w", store.ErrBadPath, errNotRegular)
	}
	return fileStat{rel: rel, size: fi.Size(), mtime: fi.ModTime().UnixNano(), id: idOf(fi), inodeSays: true}, nil
}

// cleanRel checks that rel stays inside the root and names a file the
// watcher would index, and returns it cleaned with "/" separators.
func cleanRel(rel string) (string, error) {
	if !filepath.IsLocal(rel) || strings.ContainsRune(rel, 0) {
		return "", fmt.Errorf("%w: not a path inside the files root", store.ErrBadPath)
	}
	clean := path.Clean(filepath.ToSlash(filepath.Clean(rel)))
	if clean == "." {
		return "", fmt.Errorf("%w: not a file", store.ErrBadPath)
	}
	if ignoredRel(clean) {
		return "", fmt.Errorf("%w: hidden or partial files are not indexed", store.ErrBadPath)
	}
	return clean, nil
}

func (w *Watcher) localFile(rel string, e entry) store.LocalFile {
	return store.LocalFile{Path: w.absOf(rel), CID: e.cid, Size: e.size, MtimeNano: e.mtime}
}
