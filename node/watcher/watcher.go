package watcher

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sync/errgroup"

	"github.com/metanode/metanode/store"
)

// Defaults for Config fields left zero.
const (
	DefaultDebounce    = 250 * time.Millisecond
	DefaultRescan      = 10 * time.Minute
	DefaultHashWorkers = 2
	DefaultProgress    = 5 * time.Second
)

// Limits that keep memory and transactions bounded.
const (
	maxPending = 1 << 16 // debounced paths held before falling back to a rescan
	applyBatch = 512     // updates per ApplyFiles call (one store transaction)
	hashBatch  = 256     // files hashed between two commits during a scan
)

// ErrClosed is returned by Register before Open or after Close, and by a
// second Close. It wraps store.ErrClosed, so the api answers 503 as it does
// for a closed store.
var ErrClosed = fmt.Errorf("watcher closed: %w", store.ErrClosed)

// Store is what the watcher needs of the store; *store.Store implements it.
type Store interface {
	ApplyFiles(ctx context.Context, updates []store.FileUpdate) ([]store.FileResult, error)
	LocalFiles(ctx context.Context) ([]store.LocalFile, error)
	// Resolve gives the rid of a known cid, so Register can answer for an
	// unchanged file without writing anything.
	Resolve(ctx context.Context, h string) (string, error)
}

var _ Store = (*store.Store)(nil)

// Config configures a Watcher. Zero fields take the documented defaults.
type Config struct {
	Root   string       // files root (--files, FILES_PATH); waited for while missing
	Store  Store        // where local_file rows live
	Logger *slog.Logger // default slog.Default()

	// Debounce is how long a path must stay quiet before it is looked at;
	// it is also how long a vanished file waits for a rename partner.
	// Default DefaultDebounce.
	Debounce time.Duration
	// Rescan is the period of the safety-net rescan; 0 means DefaultRescan,
	// negative turns it off.
	Rescan time.Duration
	// HashWorkers bounds concurrent hashing; default DefaultHashWorkers.
	HashWorkers int
	// Progress is how often a running scan logs its counters; default
	// DefaultProgress.
	Progress time.Duration
}

// Stats are the watcher's counters since Open.
type Stats struct {
	Files       int   // files known (rows under the root)
	Scans       int64 // completed scans, the initial one included
	Hashed      int64 // files hashed
	HashedBytes int64 // bytes read for hashing
	Applied     int64 // updates the store accepted
}

// Watcher keeps local_file rows in step with a files root.
type Watcher struct {
	cfg Config
	log *slog.Logger

	// Set by Open, read-only afterwards (root: replaced by the scanner when
	// the root directory was replaced, see checkRoot; nil until the scanner
	// opens it when the root was missing at Open).
	root     atomic.Pointer[os.Root]
	rootLost atomic.Bool // the root path is missing: Health reports it
	// rootEmpty: files indexed when the last scan found the root empty and
	// did not run (checkEmpty); 0 when not in that state.
	rootEmpty atomic.Int64
	rootAbs   string // cleaned absolute root, the prefix of every LocalFile.Path
	fsw       *fsnotify.Watcher
	// unlinked: the event loop saw a name removed (ignored names too) since
	// its last flush: a moved file's inode may have been freed and reused.
	unlinked bool
	// stableDevs: device → whether its file system keeps inodes (scan.go).
	stableDevs sync.Map
	ctx        context.Context
	cancel     context.CancelCauseFunc
	g          *errgroup.Group
	ready      chan struct{}
	loaded     chan struct{} // closed once the view holds the store's rows
	rescanCh   chan struct{} // capacity 1: requests coalesce

	// life serialises Open and Close: a Close while Open runs waits for it
	// and then stops what it started; an Open after Close returns
	// ErrClosed (review s12 H M1: the loops outlived a Close that raced
	// Open).
	life      sync.Mutex
	opened    bool
	closed    bool
	closeOnce sync.Once

	mu    sync.Mutex // guards view; held across ApplyFiles
	view  view
	watch watches

	hashed, hashedBytes, applied, scans atomic.Int64
	dirOpens                            atomic.Int64 // directories opened by name (openChild): what a walk costs
}

// New returns an unopened watcher. It does no I/O.
func New(cfg Config) *Watcher {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Debounce <= 0 {
		cfg.Debounce = DefaultDebounce
	}
	if cfg.Rescan == 0 {
		cfg.Rescan = DefaultRescan
	}
	if cfg.HashWorkers <= 0 {
		cfg.HashWorkers = DefaultHashWorkers
	}
	if cfg.Progress <= 0 {
		cfg.Progress = DefaultProgress
	}
	return &Watcher{
		cfg:      cfg,
		log:      cfg.Logger.With("component", "watcher"),
		ready:    make(chan struct{}),
		loaded:   make(chan struct{}),
		rescanCh: make(chan struct{}, 1),
		view:     newView(),
		watch:    watches{dirs: map[string]struct{}{}},
	}
}

// Open opens the files root, starts watching it and starts the initial scan
// in the background (Ready closes when it has been applied). ctx bounds only
// Open. A root that does not exist is no error: Health reports
// ErrRootMissing and the scanner waits for it, as for a root lost while
// running. A root that is not a directory gives an error wrapping
// store.ErrBadPath.
func (w *Watcher) Open(ctx context.Context) (err error) {
	if w.cfg.Store == nil {
		return errors.New("open watcher: no store")
	}
	if w.cfg.Root == "" {
		return fmt.Errorf("open watcher: no files root: %w", store.ErrBadPath)
	}
	w.life.Lock()
	defer w.life.Unlock()
	if w.closed {
		return fmt.Errorf("open watcher: %w", ErrClosed)
	}
	if w.opened {
		return errors.New("open watcher: already opened")
	}
	w.opened = true
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("open watcher: %w", err)
	}
	abs, err := filepath.Abs(w.cfg.Root)
	if err != nil {
		return fmt.Errorf("open watcher: files root %s: %w", w.cfg.Root, err)
	}
	w.rootAbs = abs
	// A root that is not there yet (a share mounted after the node
	// started) is waited for as one lost while running: the scanner opens
	// it when it appears. Failing here would take the node down; scanning
	// it as empty would delete every row.
	st, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		w.rootLost.Store(true)
		w.log.Warn("files root is missing; nothing is deleted, waiting for it to come back", "root", abs)
	case err != nil:
		return fmt.Errorf("open watcher: files root: %w", err)
	case !st.IsDir():
		return fmt.Errorf("open watcher: files root %s is not a directory: pass --files DIR (or FILES_PATH) naming a directory: %w", abs, store.ErrBadPath)
	default:
		root, err := os.OpenRoot(abs)
		if err != nil {
			return fmt.Errorf("open watcher: files root: %w", err)
		}
		w.root.Store(root)
	}
	if w.fsw, err = fsnotify.NewWatcher(); err != nil {
		if root := w.rootFS(); root != nil {
			root.Close()
		}
		return fmt.Errorf("open watcher: fsnotify: %w", err)
	}
	// The root's own watch is added by the first scan, like every other
	// directory's, before its entries are read.
	w.ctx, w.cancel = context.WithCancelCause(context.Background())
	w.g = new(errgroup.Group)
	w.g.Go(func() error { return w.runLoop(w.ctx) })
	w.g.Go(func() error { return w.runScanner(w.ctx) })
	w.log.Info("watching files", "root", abs, "debounce", w.cfg.Debounce, "rescan", w.cfg.Rescan)
	return nil
}

// Ready is closed once the initial scan has been applied to the store.
func (w *Watcher) Ready() <-chan struct{} { return w.ready }

// Root is the cleaned absolute files root (set by Open).
func (w *Watcher) Root() string { return w.rootAbs }

// Stats returns the watcher's counters.
func (w *Watcher) Stats() Stats {
	w.mu.Lock()
	n := len(w.view.known)
	w.mu.Unlock()
	return Stats{
		Files:       n,
		Scans:       w.scans.Load(),
		Hashed:      w.hashed.Load(),
		HashedBytes: w.hashedBytes.Load(),
		Applied:     w.applied.Load(),
	}
}

// Close stops both loops, waits for them, then closes fsnotify and the root.
// A second call returns ErrClosed.
func (w *Watcher) Close() error {
	err := ErrClosed
	w.closeOnce.Do(func() {
		err = nil
		w.life.Lock()
		defer w.life.Unlock()
		w.closed = true
		if w.cancel != nil {
			w.cancel(ErrClosed)
			err = w.g.Wait()
			err = errors.Join(err, w.fsw.Close())
			if root := w.rootFS(); root != nil { // none while the root was never there
				err = errors.Join(err, root.Close())
			}
		}
	})
	return err
}

// Resync reloads the rows from the store and rescans the root in the
// background: for when the rows were changed behind the watcher's back
// (POST /api/metadata/clear wipes local_file). Files whose size and mtime
// still match what the watcher knew are added again without hashing.
func (w *Watcher) Resync(ctx context.Context) error {
	if !w.live() {
		return ErrClosed
	}
	defer w.requestRescan()
	if err := w.load(ctx); err != nil {
		w.mu.Lock()
		w.view.dirty = true // the rescan reloads
		w.mu.Unlock()
		return fmt.Errorf("resync: %w", err)
	}
	return nil
}

// live reports whether Open succeeded and Close has not begun.
func (w *Watcher) live() bool {
	return w.ctx != nil && w.ctx.Err() == nil
}

// requestRescan asks the scanner for a rescan; requests coalesce.
func (w *Watcher) requestRescan() {
	select {
	case w.rescanCh <- struct{}{}:
	default:
	}
}
