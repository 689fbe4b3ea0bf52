//go:build unix

package store

import "syscall"

// diskFull reports whether the file system holding dir has no space left
// for this process: SQLite reports a write that found no room as an I/O
// error in some places (growing the shared-memory file of the WAL).
func diskFull(dir string) bool {
	var st syscall.Statfs_t
	return syscall.Statfs(dir, &st) == nil && st.Bavail == 0
}
