//go:build unix

package watcher

import (
	"io/fs"
	"syscall"
)

// idOf is the file's device and inode from a stat: a move inside one
// filesystem keeps them.
func idOf(fi fs.FileInfo) fileID {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)}
	}
	return fileID{}
}
