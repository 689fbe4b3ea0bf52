//go:build unix

package api_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestFileServing_NamedPipe: an indexed file swapped for a named pipe is
// refused at once (opening one for reading would wait for a writer).
func TestFileServing_NamedPipe(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.root, "plugin/a.txt"), "bytes")
	r, err := e.c.RegisterFile(t.Context(), "plugin/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(e.root, "plugin/a.txt")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(e.root, "plugin/a.txt"), 0o644); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	e.get("/file/"+r.CID).wantError(t, 404, "unknown_cid")
	a := e.get("/api/file/" + r.CID + "/info")
	if strings.TrimSpace(string(a.body)) != `{"exists":false}` {
		t.Errorf("info of a named pipe: %s", a.body)
	}
}
