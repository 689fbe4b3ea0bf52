//go:build linux

package watcher

import "syscall"

// renumbersInodes reports whether the file system holding path may number
// a file's inode anew once its cache forgets it (FUSE mounts such as
// rclone's, CIFS/SMB): a scan cannot tell a replaced file by its inode
// there. Unknown (statfs fails): assume it may.
func renumbersInodes(path string) bool {
	var st syscall.Statfs_t
	if syscall.Statfs(path, &st) != nil {
		return true
	}
	switch uint32(st.Type) {
	case 0x65735546, // FUSE_SUPER_MAGIC
		0xFF534D42, // CIFS_MAGIC_NUMBER
		0xFE534D42, // SMB2_MAGIC_NUMBER
		0x517B:     // SMB_SUPER_MAGIC
		return true
	}
	return false
}
