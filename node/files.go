package node

import (
	"context"
	"fmt"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/store"
)

// openWatcher starts the file watcher when a files root is set.
func (n *Node) openWatcher(ctx context.Context) error {
	if n.cfg.FilesRoot == "" {
		return nil
	}
	return fmt.Errorf("files root %s: the file watcher is not available in this build yet", n.cfg.FilesRoot)
}

func (n *Node) watcherHealth() string {
	if n.cfg.FilesRoot == "" {
		return "off"
	}
	return "ok"
}

// RegisterFile hashes and records a file under the files root.
func (n *Node) RegisterFile(ctx context.Context, rel string) (api.RegisterResult, error) {
	return api.RegisterResult{}, fmt.Errorf("%w: this node has no files root (start it with --files DIR)", store.ErrBadPath)
}
