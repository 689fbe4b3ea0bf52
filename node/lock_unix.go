//go:build unix

package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// LockFile in the data directory is held (flock) while a node runs, so a
// second node on the same directory stops at once instead of sharing its
// databases.
const LockFile = "lock"

// lockRetries and lockRetryWait: how long a start waits out a probe of the
// lock (DataDirInUse) before it reports the directory in use.
const (
	lockRetries   = 5
	lockRetryWait = 10 * time.Millisecond
)

// lockDataDir takes the data directory's lock; the returned func releases
// it. The kernel drops the lock when the process dies, so a crash leaves
// nothing to clean up.
func lockDataDir(dir string) (func() error, error) {
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	// DataDirInUse (metanode id) holds the lock for an instant: a node
	// starting then would be refused as a second node. A running node
	// holds it for good, so a few short retries tell the two apart.
	for try := 0; errors.Is(err, syscall.EWOULDBLOCK) && try < lockRetries; try++ {
		time.Sleep(lockRetryWait)
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			// A *fs.PathError names the directory locked, so the command
			// can tell a truth database kept elsewhere (--truth-db) from
			// the data directory and name the flag to change.
			return nil, &fs.PathError{Op: "lock", Path: dir, Err: ErrDataDirInUse}
		}
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	return f.Close, nil // closing the file releases the lock
}

// DataDirInUse reports whether a running node holds dir's lock. It
// creates nothing (a directory no node ever ran on is not in use); when
// the lock is free it holds it for the instant of the test (a shared
// lock, released at once), which lockDataDir waits out.
func DataDirInUse(dir string) bool {
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
