package store

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWriteKeyFile_Failures: a write that fails at any step (a full disk
// while writing, a failed directory sync) leaves nothing behind: no key
// under the final name, no temporary file; so the next attempt, and
// keygen's never-overwrite rule, find a clean directory. Where the file
// system has no hard links the key is still written, and still never over
// an existing file.
func TestWriteKeyFile_Failures(t *testing.T) {
	sg, err := GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	data := []byte(sg.PrivateHex() + "\n")
	noSpace := func(*os.File, []byte) error { return syscall.ENOSPC }
	noLink := func(string, string) error { return &os.LinkError{Op: "link", Err: syscall.EPERM} }
	for _, tc := range []struct {
		name    string
		ops     func(o *keyFileOps)
		want    error // nil: written
		present bool  // a file already at the path
	}{
		{name: "DiskFull", ops: func(o *keyFileOps) { o.write = noSpace }, want: syscall.ENOSPC},
		{name: "ShortWrite", ops: func(o *keyFileOps) {
			o.write = func(f *os.File, b []byte) error { _, _ = f.Write(b[:7]); return syscall.ENOSPC }
		}, want: syscall.ENOSPC},
		{name: "DirSyncFails", ops: func(o *keyFileOps) { o.syncDir = func(string) error { return syscall.EIO } }, want: syscall.EIO},
		{name: "Exists", present: true, want: fs.ErrExist},
		{name: "NoHardLinks", ops: func(o *keyFileOps) { o.link = noLink }},
		{name: "NoHardLinksExists", ops: func(o *keyFileOps) { o.link = noLink }, present: true, want: fs.ErrExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "node.key")
			if tc.present {
				if err := os.WriteFile(path, []byte("theirs"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			ops := realKeyFileOps
			if tc.ops != nil {
				tc.ops(&ops)
			}
			err := writeKeyFile(path, data, ops)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			got, rerr := os.ReadFile(path)
			switch {
			case tc.present:
				if string(got) != "theirs" {
					t.Fatalf("the existing file now holds %q", got)
				}
			case tc.want == nil:
				if string(got) != string(data) {
					t.Fatalf("the key file holds %q, want %q", got, data)
				}
				if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
					t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
				}
			default:
				if !errors.Is(rerr, fs.ErrNotExist) {
					t.Fatalf("a failed write left %q (read error %v)", got, rerr)
				}
			}
			ents, _ := os.ReadDir(dir)
			want := 0
			if tc.present || tc.want == nil {
				want = 1
			}
			if len(ents) != want {
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				t.Fatalf("directory holds %v, want %d file(s)", names, want)
			}
		})
	}
}
