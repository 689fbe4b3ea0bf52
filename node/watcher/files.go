package watcher

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/metanode/metanode/store"
)

// midhashSample is how many bytes midhash256 reads at most (content-ids.md).
const midhashSample = 1 << 20

// errLinked marks a path that is, or lies below, a symlink or a non-directory.
var errLinked = errors.New("path goes through a symlink or a file")

// errNotRegular marks a path that is not a regular file.
var errNotRegular = errors.New("not a regular file")

// partialSuffixes are the names browsers and torrent clients give downloads
// in progress; the finished file arrives by a rename, which is an add.
var partialSuffixes = []string{".part", ".partial", ".crdownload", ".!qB"}

// ignoredName reports whether a directory entry is skipped: hidden entries
// (a leading dot: rsync and syncthing temp files, .Trash, AppleDouble) and,
// for files, partial downloads.
func ignoredName(name string, dir bool) bool {
	if strings.HasPrefix(name, ".") {
		return true
	}
	if dir {
		return false
	}
	for _, s := range partialSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// ignoredRel reports whether a file path (relative, "/"-separated) is
// skipped: its name or any of its directories is ignored.
func ignoredRel(rel string) bool {
	dir, name := path.Split(rel)
	if ignoredName(name, false) {
		return true
	}
	for d := range strings.SplitSeq(strings.TrimSuffix(dir, "/"), "/") {
		if d != "" && ignoredName(d, true) {
			return true
		}
	}
	return false
}

func baseName(rel string) string { return path.Base(rel) }

// joinRel appends a name to a relative directory.
func joinRel(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// relOf maps an absolute path to its path relative to the root; ok is false
// for a path outside the root.
func (w *Watcher) relOf(abs string) (string, bool) {
	rel, err := filepath.Rel(w.rootAbs, filepath.Clean(abs))
	if err != nil || !filepath.IsLocal(rel) {
		return "", false
	}
	return filepath.ToSlash(rel), true
}

// absOf maps a relative path to the absolute path stored in local_file.
func (w *Watcher) absOf(rel string) string {
	return filepath.Join(w.rootAbs, filepath.FromSlash(rel))
}

// lstat stats rel without following a symlink anywhere: every directory on
// the way must be a real directory (errLinked otherwise). os.Root already
// refuses to leave the root; this also refuses links that stay inside, so a
// file is only ever known under its real path. The directories are opened
// one name at a time, each from the one before (openDir): the cost grows
// with the depth, not with its square (a multi-name os.Root call walks
// every name again).
func (w *Watcher) lstat(rel string) (fs.FileInfo, error) {
	d, name, err := w.openParent(rel)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Lstat(name)
}

// openParent opens the directory holding rel (see openDir) and returns it
// with rel's last name ("." for the root itself). The caller closes it.
func (w *Watcher) openParent(rel string) (*os.Root, string, error) {
	if rel == "." {
		d, err := w.openDir(".")
		return d, ".", err
	}
	dir, name := path.Split(rel)
	d, err := w.openDir(strings.TrimSuffix(dir, "/"))
	return d, name, err
}

// openDir opens the directory rel below the root ("" or ".": the root
// itself) with a handle of its own, which the caller closes, refusing any
// name on the way that is not a real directory (errLinked).
func (w *Watcher) openDir(rel string) (*os.Root, error) {
	root, err := w.openRoot()
	if err != nil {
		return nil, err
	}
	cur, err := root.OpenRoot(".")
	if err != nil || rel == "" || rel == "." {
		return cur, err
	}
	for name := range strings.SplitSeq(rel, "/") {
		next, err := w.openChild(cur, name)
		cur.Close()
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return cur, nil
}

// openChild opens the directory name in d, refusing a symlink or a file
// (errLinked).
func (w *Watcher) openChild(d *os.Root, name string) (*os.Root, error) {
	w.dirOpens.Add(1)
	fi, err := d.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s: %w", name, errLinked)
	}
	return d.OpenRoot(name)
}

// gone reports whether an lstat error means the file is no longer there.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, errLinked)
}

// hashFile computes the midhash256 of the regular file at rel. Size and
// mtime come from the open file, so they describe what was hashed.
func (w *Watcher) hashFile(rel string) (hashedFile, error) {
	d, name, err := w.openParent(rel)
	if err != nil {
		return hashedFile{}, err
	}
	defer d.Close()
	fi, err := d.Lstat(name)
	if err != nil {
		return hashedFile{}, err
	}
	if !fi.Mode().IsRegular() {
		return hashedFile{}, fmt.Errorf("%s: %w", rel, errNotRegular)
	}
	// Non-blocking: a named pipe swapped in after the lstat would
	// otherwise hold this worker (and Close) until a writer came; the
	// SameFile check below refuses it. Regular files read the same.
	f, err := d.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return hashedFile{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return hashedFile{}, err
	}
	// Swapped for a link or another file between lstat and open.
	if !os.SameFile(fi, st) {
		return hashedFile{}, fmt.Errorf("%s: %w", rel, errNotRegular)
	}
	cid, err := store.Midhash256(f, st.Size())
	if err != nil {
		return hashedFile{}, fmt.Errorf("hash %s: %w", rel, err)
	}
	w.hashed.Add(1)
	w.hashedBytes.Add(min(st.Size(), midhashSample))
	return hashedFile{fileStat{rel: rel, size: st.Size(), mtime: st.ModTime().UnixNano(), id: idOf(st)}, cid}, nil
}

// hashAll hashes files on at most HashWorkers goroutines. Files that
// vanished or cannot be read are left out (logged); their next event or
// the next rescan brings them back.
func (w *Watcher) hashAll(ctx context.Context, files []fileStat, p *progress) []hashedFile {
	out := make([]hashedFile, len(files))
	ok := make([]bool, len(files))
	var g errgroup.Group
	g.SetLimit(w.cfg.HashWorkers)
	for i, f := range files {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if ctx.Err() != nil {
				return nil
			}
			h, err := w.hashFile(f.rel)
			switch {
			case err == nil:
				out[i], ok[i] = h, true
				p.hashedOne(h.size)
			case gone(err) || errors.Is(err, errNotRegular):
				w.log.Debug("file went away before hashing", "path", f.rel, "err", err)
			default:
				w.log.Warn("hash file", "path", f.rel, "err", err)
			}
			return nil
		})
	}
	_ = g.Wait() // the workers report through out and ok
	res := out[:0]
	for i := range out {
		if ok[i] {
			res = append(res, out[i])
		}
	}
	return res
}

// watches is the set of directories given to fsnotify (relative paths).
type watches struct {
	mu     sync.Mutex
	dirs   map[string]struct{}
	warned bool // the watch limit was hit and logged
}

// addWatch watches a directory. It always asks fsnotify, which is cheap and
// idempotent: a directory removed and made again under the same name has a
// new inode, and the watch must follow it.
func (w *Watcher) addWatch(rel string) {
	w.watch.mu.Lock()
	defer w.watch.mu.Unlock()
	if err := w.fsw.Add(w.absOf(rel)); err != nil {
		// Typically the inotify watch limit: the rescan still finds changes.
		if !w.watch.warned {
			w.watch.warned = true
			w.log.Warn("watch directory; changes below it wait for the rescan", "path", rel, "err", err)
		}
		return
	}
	w.watch.dirs[rel] = struct{}{}
}

// pruneWatches drops the watches of directories that no longer exist, which
// a scan finds when their events were lost, and reports how many it
// dropped. A directory moved inside the root keeps its kernel watch under
// the old name until then, so its new name is only watched properly by the
// next scan. Directories the scan's walk just listed (seen) are there.
func (w *Watcher) pruneWatches(seen map[string]struct{}) int {
	w.watch.mu.Lock()
	var stale []string
	for d := range w.watch.dirs {
		if _, ok := seen[d]; ok {
			continue
		}
		if fi, err := w.lstat(d); err != nil && gone(err) || err == nil && !fi.IsDir() {
			stale = append(stale, d)
		}
	}
	w.watch.mu.Unlock()
	for _, d := range stale {
		w.dropWatches(d)
	}
	return len(stale)
}

// dropWatches forgets dir and every watched directory below it and reports
// whether dir was watched. The kernel already dropped a removed directory's
// watch; a moved one would keep reporting under its old name.
func (w *Watcher) dropWatches(dir string) bool {
	w.watch.mu.Lock()
	defer w.watch.mu.Unlock()
	_, was := w.watch.dirs[dir]
	prefix := dir + "/"
	for d := range w.watch.dirs {
		if d == dir || dir == "." || strings.HasPrefix(d, prefix) {
			_ = w.fsw.Remove(w.absOf(d)) // usually gone already
			delete(w.watch.dirs, d)
		}
	}
	return was
}

// progress counts a scan's work and logs it every Config.Progress. A nil
// *progress counts nothing (event-loop batches).
type progress struct {
	w                   *Watcher
	kind                string
	start               time.Time
	seen, hashed, bytes atomic.Int64
	lastLog             atomic.Int64 // unix nanos
	vanished            int
}

func (w *Watcher) newProgress(kind string) *progress {
	now := time.Now()
	p := &progress{w: w, kind: kind, start: now}
	p.lastLog.Store(now.UnixNano())
	return p
}

func (p *progress) seenOne() {
	if p != nil {
		p.seen.Add(1)
		p.maybeLog()
	}
}

func (p *progress) hashedOne(size int64) {
	if p != nil {
		p.hashed.Add(1)
		p.bytes.Add(min(size, midhashSample))
		p.maybeLog()
	}
}

func (p *progress) maybeLog() {
	now := time.Now().UnixNano()
	last := p.lastLog.Load()
	if time.Duration(now-last) < p.w.cfg.Progress || !p.lastLog.CompareAndSwap(last, now) {
		return
	}
	p.w.log.Info(p.kind+" in progress", "seen", p.seen.Load(), "hashed", p.hashed.Load(),
		"bytes", p.bytes.Load(), "elapsed", time.Since(p.start).Round(time.Millisecond))
}
