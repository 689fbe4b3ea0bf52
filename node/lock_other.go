//go:build !unix

package node

// LockFile is unused where flock is not available.
const LockFile = "lock"

// lockDataDir does nothing on systems without flock: there, the owner must
// not start two nodes on one data directory.
func lockDataDir(dir string) (func() error, error) { return func() error { return nil }, nil }

// DataDirInUse is always false where data directories are not locked.
func DataDirInUse(string) bool { return false }
