package node

import "context"

// openAPI starts the local HTTP API.
func (n *Node) openAPI(ctx context.Context) error { return nil }

// APIURL is the API's base URL, e.g. http://127.0.0.1:9000 (valid after Open).
func (n *Node) APIURL() string { return "" }
