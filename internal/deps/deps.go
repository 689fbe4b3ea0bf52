//go:build tools

// Package deps pins modules that packages under construction will import,
// so that go mod tidy keeps them meanwhile. Deleted once they are imported.
package deps

import (
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/libp2p/go-libp2p"
	_ "github.com/libp2p/go-libp2p-kad-dht"
	_ "github.com/libp2p/go-libp2p-pubsub"
	_ "github.com/libp2p/go-msgio"
	_ "go.uber.org/goleak"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/sync/errgroup"
	_ "golang.org/x/time/rate"
	_ "modernc.org/sqlite"
)
