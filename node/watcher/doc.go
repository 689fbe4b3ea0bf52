// Package watcher keeps the store's local_file rows in step with a files
// root: an initial scan, then live changes from fsnotify (debounced per
// path), and a periodic rescan as a safety net. Each file is identified by
// its midhash256 (content-ids.md); a file whose size and mtime match its row
// (and its inode, which only the in-memory view keeps) is never hashed
// again. A new file pairs with a vanished one as its rename without hashing
// only when it is the same inode and the old name's events said it moved;
// otherwise only an equal cid pairs them. Changes reach the store as
// store.FileUpdate batches (add, change, delete, rename, reset) through the
// small Store interface declared here, which *store.Store implements.
//
// It imports only the store (for types and midhash256). All file access goes
// through an os.Root on the files root, and symlinks are never followed, so
// nothing outside the root is ever read.
//
// Concurrency: Open starts two goroutines on the watcher's own context: the
// event loop (fsnotify events, per-path debounce timers, flushes) and the
// scanner (the initial scan, then rescans on a ticker or after an event
// overflow, one at a time). Both hash through a bounded pool of HashWorkers
// goroutines per batch. One mutex guards the in-memory view of the rows
// (known files, recently vanished files awaiting a rename partner) and is
// held across each ApplyFiles call, so the store sees changes in the order
// the view records them. Register runs on the caller's goroutine under the
// same mutex. Hashing happens outside the mutex, so each settle takes a
// ticket before it looks at the disk and every decision about a path
// records its ticket: a result older than the path's last decision (the
// file changed or vanished again meanwhile) is dropped. The scanner checks
// the root path before each scan and alone replaces the root handle (an
// atomic pointer) when the root was deleted and made again; while the path
// is missing it polls it and Health reports it. A root missing at Open (a
// share not mounted yet) is the same wait, with no handle until the
// scanner opens it. So is a root with no entry at all while files are
// indexed (an unmounted mount point): the scan stops before its walk and
// the root is polled; the event loop is not held back (an unmount sends
// no event, and files deleted one by one delete their rows). Close cancels, waits for both goroutines, then closes
// fsnotify and the root.
package watcher
