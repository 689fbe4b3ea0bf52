package node_test

import (
	"context"
	"errors"
	"testing"

	"github.com/metanode/metanode/node"
)

// A second node on a running node's data directory stops at once; once the
// first closes, the directory is free again.
func TestNode_DataDirLock(t *testing.T) {
	dir := dataDir(t, "home")
	first := openNodeNoCleanup(t, testConfig(t, dir))
	second := node.New(testConfig(t, dir))
	if err := second.Open(context.Background()); !errors.Is(err, node.ErrDataDirInUse) {
		t.Fatalf("second node on one data directory: %v", err)
	}
	_ = second.Close()
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	openNode(t, testConfig(t, dir))
}
