package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// ErrBadKeyFile: a key file that exists but does not hold a key (empty,
// cut short, or another file).
var ErrBadKeyFile = errors.New("not a metanode key (64 hex characters of a secp256k1 private key)")

// keyFileOps are the steps of writeKeyFile that can fail in ways a test
// cannot cause for real (a full disk, a file system without hard links).
type keyFileOps struct {
	write   func(f *os.File, b []byte) error
	link    func(oldname, newname string) error
	syncDir func(dir string) error
}

var realKeyFileOps = keyFileOps{
	write:   func(f *os.File, b []byte) error { _, err := f.Write(b); return err },
	link:    os.Link,
	syncDir: syncDir,
}

// writeKeyFile puts data at path (mode 0600) whole or not at all, and
// never over an existing file: the bytes go to a temporary file in the
// same directory, are fsynced, and only then get the final name by a hard
// link (which, unlike rename, fails when the name is taken). A crash or a
// full disk part-way leaves at most the temporary file, never a short
// key under the final name; every error removes what this call made.
func writeKeyFile(path string, data []byte, ops keyFileOps) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	RemoveStaleKeyTemps(path)
	tmp, err := os.CreateTemp(dir, keyTempPrefix(path)+"*") // mode 0600
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	defer func() { _ = os.Remove(tmpName) }() // the final name is a link of its own
	if err := ops.write(tmp, data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := placeKeyFile(tmpName, path, ops); err != nil {
		return err
	}
	if err := ops.syncDir(dir); err != nil {
		_ = os.Remove(path) // ours: the link above made it
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// staleKeyTempAge: a temporary key file older than this is not another
// writer's at work (its whole life is a write, an fsync and a link).
const staleKeyTempAge = time.Minute

func keyTempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// RemoveStaleKeyTemps deletes the temporary files writeKeyFile leaves for
// the key at path when its process dies part-way (they hold key bytes,
// mode 0600): those older than staleKeyTempAge. It returns how many it
// removed; it is best effort (a directory it cannot read removes nothing).
func RemoveStaleKeyTemps(path string) int {
	dir, prefix := filepath.Dir(path), keyTempPrefix(path)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		fi, err := e.Info()
		if err != nil || time.Since(fi.ModTime()) < staleKeyTempAge {
			continue
		}
		if os.Remove(filepath.Join(dir, e.Name())) == nil {
			n++
		}
	}
	return n
}

// placeKeyFile gives the written temporary file its final name. Where the
// file system has no hard links (FAT, some network and container mounts;
// an error other than "exists"), it reserves the name with an exclusive
// create and renames the temporary file over its own empty reservation:
// still never over another's file, and the key bytes are already durable,
// so only a crash between those two calls can leave an empty file.
func placeKeyFile(tmp, path string, ops keyFileOps) error {
	err := ops.link(tmp, path)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return err
	}
	f, cerr := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if cerr != nil {
		if errors.Is(cerr, fs.ErrExist) {
			return cerr
		}
		return errors.Join(err, cerr)
	}
	f.Close()
	if rerr := os.Rename(tmp, path); rerr != nil {
		_ = os.Remove(path)
		return rerr
	}
	return nil
}

// syncDir makes a new directory entry durable. Windows cannot open a
// directory for sync; its file systems journal names themselves.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
