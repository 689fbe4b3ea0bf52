package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var bin struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

// binaryEnv names a binary the parent test process built, for a test
// re-executed in a network namespace (internal/netnstest) to reuse.
const binaryEnv = "METANODE_TEST_BINARY"

// buildBinary builds the real metanode binary once per test run.
func buildBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(binaryEnv); p != "" {
		return p
	}
	bin.once.Do(func() {
		bin.dir, bin.err = os.MkdirTemp("", "metanode-e2e-")
		if bin.err != nil {
			return
		}
		bin.path = filepath.Join(bin.dir, "metanode")
		// -trimpath as make build and make release: one set of compiled
		// packages in the build cache serves all three.
		cmd := exec.Command("go", "build", "-trimpath", "-o", bin.path, "-ldflags", "-X main.version=e2e-test", ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		bin.out, bin.err = cmd.CombinedOutput()
	})
	if bin.err != nil {
		t.Fatalf("go build: %v\n%s", bin.err, bin.out)
	}
	return bin.path
}

func cleanupBinary() {
	if bin.dir != "" {
		os.RemoveAll(bin.dir)
	}
}
