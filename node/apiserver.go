package node

import (
	"context"

	"github.com/metanode/metanode/api"
)

// openAPI starts the local HTTP API on the node's store and on the node
// itself (api.Node); it serves the node's metrics registry.
func (n *Node) openAPI(ctx context.Context) error {
	srv := api.NewServer(api.Config{
		Addr:         n.cfg.HTTPAddr,
		Store:        n.apiStore(), // n.store; a clear also resyncs the watcher
		Node:         n,
		FilesRoot:    n.cfg.FilesRoot,
		AllowedHosts: n.cfg.HTTPAllowed,
		LegacySigner: n.legacy,
		Logger:       n.cfg.Logger,
		Registerer:   n.reg,
		Gatherer:     n.reg,
	})
	if err := srv.Open(ctx); err != nil {
		return err
	}
	n.api = srv
	n.addCloser("", srv.Close) // "close api: …"
	return nil
}

// APIURL is the API's base URL, e.g. http://127.0.0.1:9000 (valid after Open).
func (n *Node) APIURL() string {
	if n.api == nil {
		return ""
	}
	return n.api.URL()
}
