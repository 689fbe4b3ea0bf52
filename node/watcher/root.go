package watcher

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/metanode/metanode/store"
)

// ErrRootMissing is what Health reports while the files root path does not
// name a directory (moved away, deleted, or not there yet at Open: a share
// not mounted yet). Nothing is deleted meanwhile: scans fail until it is
// back.
var ErrRootMissing = errors.New("files root is missing")

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

// errMissing is the error of a request the missing root cannot serve
// (Register): it wraps ErrRootMissing and store.ErrUnavailable, so the api
// answers 503 storage_unavailable, retryable.
func (w *Watcher) errMissing() error {
	return fmt.Errorf("%w: %w: %s (moved, deleted or not mounted); retry once it is back", store.ErrUnavailable, ErrRootMissing, w.rootAbs)
}

// Health is nil while the watcher can see its files root, and an error
// wrapping ErrRootMissing while the root is gone; the node's /health shows
// it as a degraded watcher check.
func (w *Watcher) Health() error {
	if w.rootLost.Load() {
		return fmt.Errorf("%w: %s (moved, deleted or not mounted); waiting for it to come back", ErrRootMissing, w.rootAbs)
	}
	return nil
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
