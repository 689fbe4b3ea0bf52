package node

import (
	"context"
	"fmt"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/node/watcher"
	"github.com/metanode/metanode/store"
)

// openWatcher starts the file watcher when a files root is set. Its initial
// scan runs in the background; the API serves meanwhile.
func (n *Node) openWatcher(ctx context.Context) error {
	if n.cfg.FilesRoot == "" {
		return nil
	}
	w := watcher.New(watcher.Config{
		Root:   n.cfg.FilesRoot,
		Store:  n.store,
		Logger: n.cfg.Logger,
	})
	if err := w.Open(ctx); err != nil {
		return err
	}
	n.watcher = w
	n.addCloser("watcher", w.Close)
	return nil
}

// apiStore is the store as the api uses it. With a watcher, a clear also
// resyncs the watcher: it wipes local_file, and the files still on disk
// must be added again, or tuples, GET /file/{cid} and register disagree
// with the disk until a restart.
func (n *Node) apiStore() api.Store {
	if n.watcher == nil {
		return n.store
	}
	return clearingStore{n.store, n}
}

type clearingStore struct {
	*store.Store
	n *Node
}

func (c clearingStore) Clear(ctx context.Context) (int, error) {
	cleared, err := c.Store.Clear(ctx)
	if err == nil {
		if rerr := c.n.watcher.Resync(context.WithoutCancel(ctx)); rerr != nil {
			c.n.log.Warn("clear: the watcher will re-add the files at its next rescan", "err", rerr)
		}
	}
	return cleared, err
}

// watcherHealth is the watcher's health line; degraded while the files
// root is missing (moved away or deleted: nothing is indexed).
func (n *Node) watcherHealth() (check string, degraded bool) {
	if n.watcher == nil {
		return "off", false
	}
	if err := n.watcher.Health(); err != nil {
		return err.Error(), true
	}
	select {
	case <-n.watcher.Ready():
		return "ok", false
	default:
		return "scanning", false
	}
}

// RegisterFile hashes and records a file under the files root.
func (n *Node) RegisterFile(ctx context.Context, rel string) (api.RegisterResult, error) {
	if n.watcher == nil {
		return api.RegisterResult{}, fmt.Errorf("%w: this node has no files root (start it with --files DIR)", store.ErrBadPath)
	}
	lf, fr, err := n.watcher.Register(ctx, rel)
	if err != nil {
		return api.RegisterResult{}, err
	}
	return api.RegisterResult{Root: fr.RID, CID: lf.CID, Created: fr.Created, Path: lf.Path, Size: lf.Size}, nil
}
