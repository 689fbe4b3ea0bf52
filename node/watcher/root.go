package watcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/metanode/metanode/store"
)

// ErrRootMissing is what Health reports while the files root path does not
// name a directory (moved away, deleted, or not there yet at Open: a share
// not mounted yet). Nothing is deleted meanwhile: scans fail until it is
// back.
var ErrRootMissing = errors.New("files root is missing")

// ErrRootEmpty is what Health reports while the files root is an empty
// directory (not one entry, hidden ones included) and files under it are
// indexed: most likely a share not mounted on it, not a library emptied
// behind the watcher's back. Every error that wraps it wraps
// ErrRootMissing too, and the watcher treats it the same: scans do not
// run, so nothing is deleted, and the root is polled until it has an entry.
var ErrRootEmpty = errors.New("files root is empty while files are indexed")

// emptyRootError is ErrRootEmpty with the root and the files indexed.
type emptyRootError struct {
	root  string
	files int64
}

func (e *emptyRootError) Error() string {
	return fmt.Sprintf("files root %s is empty while %d files are indexed (a share not mounted?); nothing is deleted: mount it, or if you emptied the library on purpose, put any file in it",
		e.root, e.files)
}

func (e *emptyRootError) Is(target error) bool {
	return target == ErrRootEmpty || target == ErrRootMissing
}

// rootPoll is how often the scanner looks for a missing root.
func (w *Watcher) rootPoll() time.Duration { return min(time.Second, 4*w.cfg.Debounce) }

// rootFS is the open files root: nil until the scanner opens it when the
// root was missing at Open.
func (w *Watcher) rootFS() *os.Root { return w.root.Load() }

// openRoot is rootFS, or an error wrapping ErrRootMissing while no root has
// been opened yet: never fs.ErrNotExist, which would make a known file look
// deleted.
func (w *Watcher) openRoot() (*os.Root, error) {
	if r := w.rootFS(); r != nil {
		return r, nil
	}
	return nil, w.errMissing()
}

// errMissing is the error of a request the missing (or empty, see
// checkEmpty) root cannot serve (Register): it wraps ErrRootMissing and
// store.ErrUnavailable, so the api answers 503 storage_unavailable,
// retryable.
func (w *Watcher) errMissing() error {
	if n := w.rootEmpty.Load(); n > 0 && !w.rootLost.Load() {
		return fmt.Errorf("%w: %w; retry once it is mounted", store.ErrUnavailable, &emptyRootError{w.rootAbs, n})
	}
	return fmt.Errorf("%w: %w: %s (moved, deleted or not mounted); retry once it is back", store.ErrUnavailable, ErrRootMissing, w.rootAbs)
}

// Health is nil while the watcher can see its files root, and an error
// wrapping ErrRootMissing while the root is gone, or (also wrapping
// ErrRootEmpty) while it is empty and files are indexed; the node's
// /health shows it as a degraded watcher check.
func (w *Watcher) Health() error {
	if w.rootLost.Load() {
		return fmt.Errorf("%w: %s (moved, deleted or not mounted); waiting for it to come back", ErrRootMissing, w.rootAbs)
	}
	if n := w.rootEmpty.Load(); n > 0 {
		return &emptyRootError{w.rootAbs, n}
	}
	return nil
}

// checkEmpty runs on the scanner after checkRoot and the rows' load, before
// the walk. A root with no entry at all while files under it are indexed
// is an unmounted mount point far more often than a library emptied on
// purpose, and its scan would delete every row (a delete event for each
// file, then every file hashed again once the share is mounted): the scan
// must not run (an error wrapping ErrRootEmpty and ErrRootMissing, so the
// scanner polls the root). It logs one WARN when the state begins and one
// INFO when it ends. A root with any entry, or an empty one with no file
// indexed (an empty library), is scanned as usual: to empty the library
// on purpose, put any file in it and the scan deletes the rest. Only scans
// are held back: files deleted one by one while the node runs send events,
// and those delete their rows as usual (an unmount sends none).
func (w *Watcher) checkEmpty() error {
	w.mu.Lock()
	n := int64(len(w.view.known))
	w.mu.Unlock()
	if n == 0 || !w.rootIsEmpty() {
		if w.rootEmpty.Swap(0) > 0 {
			w.log.Info("files root is not empty any more; scanning it", "root", w.rootAbs)
		}
		return nil
	}
	if w.rootEmpty.Swap(n) == 0 {
		w.log.Warn("files root is empty while files are indexed (a share not mounted?); nothing is deleted: mount it, or if you emptied the library on purpose, put any file in it",
			"root", w.rootAbs, "files", n)
	}
	return &emptyRootError{w.rootAbs, n}
}

// rootIsEmpty reports whether the root directory has no entry at all. An
// error reading it is no proof: the walk that follows reads it again, and
// fails without deleting anything.
func (w *Watcher) rootIsEmpty() bool {
	root, err := w.openRoot()
	if err != nil {
		return false
	}
	f, err := root.Open(".")
	if err != nil {
		return false
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	return len(names) == 0 && errors.Is(err, io.EOF)
}

// checkRoot runs before each scan, on the scanner. A root path that names
// no directory is reported (ErrRootMissing) and the scan must not run: the
// open handle would list the moved or deleted directory and the sweep
// would delete every row. A root path that names another directory than
// the open handle (deleted and made again) is opened anew, and every
// watch dropped: the scan that follows watches the new tree. The same
// directory moved back needs only that scan: fsnotify dropped the root's
// own watch when it moved, and the scan adds it again. A root missing at
// Open has no handle yet: it is opened here once it is there.
func (w *Watcher) checkRoot() error {
	fi, err := os.Stat(w.rootAbs)
	if err == nil && !fi.IsDir() {
		err = errors.New("not a directory")
	}
	if err != nil {
		if !w.rootLost.Swap(true) {
			w.log.Warn("files root is missing; nothing is deleted, waiting for it to come back", "root", w.rootAbs, "err", err)
		}
		return fmt.Errorf("%w: %s: %v", ErrRootMissing, w.rootAbs, err)
	}
	cur := w.rootFS()
	if cur == nil {
		nr, err := os.OpenRoot(w.rootAbs)
		if err != nil {
			w.rootLost.Store(true)
			return fmt.Errorf("%w: open %s: %v", ErrRootMissing, w.rootAbs, err)
		}
		w.root.Store(nr) // before rootLost is cleared: a found root has a handle
		w.rootLost.Store(false)
		w.log.Info("files root is there now; watching and scanning it", "root", w.rootAbs)
		return nil
	}
	if st, err := cur.Stat("."); err != nil || !os.SameFile(st, fi) {
		nr, err := os.OpenRoot(w.rootAbs)
		if err != nil {
			w.rootLost.Store(true)
			return fmt.Errorf("%w: reopen %s: %v", ErrRootMissing, w.rootAbs, err)
		}
		w.root.Store(nr)
		_ = cur.Close() // calls in flight on it finish or fail; the scan redoes them
		w.dropWatches(".")
		w.log.Warn("files root was replaced by another directory; watching and scanning the new one", "root", w.rootAbs)
	}
	if w.rootLost.Swap(false) {
		w.log.Info("files root is back; rescanning", "root", w.rootAbs)
	}
	return nil
}
