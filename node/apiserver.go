package node

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/metanode/metanode/api"
)

// openAPI starts the local HTTP API on the node's store and on the node
// itself (api.Node); it serves the node's metrics registry.
func (n *Node) openAPI(ctx context.Context) error {
	var token, tokenPath string
	if n.cfg.DataDir != "" {
		tokenPath = filepath.Join(n.cfg.DataDir, TokenFile)
		var err error
		if token, err = n.loadOrCreateToken(tokenPath); err != nil {
			return fmt.Errorf("open api: %w", err)
		}
	}
	srv := api.NewServer(api.Config{
		Addr:          n.cfg.HTTPAddr,
		Store:         n.apiStore(), // n.store; a clear also resyncs the watcher
		Node:          n,
		FilesRoot:     n.cfg.FilesRoot,
		AllowedHosts:  n.cfg.HTTPAllowed,
		LegacySigner:  n.legacy,
		WebDAVWrites:  n.cfg.WebDAVWrites,
		Socket:        n.cfg.Access.Socket,
		LocalNetworks: n.cfg.Access.LocalNetworks,
		CORSOrigins:   n.cfg.Access.CORSOrigins,
		GUIUser:       n.cfg.Access.GUIUser,
		GUIPassword:   n.cfg.Access.GUIPassword,
		Token:         token,
		TokenFile:     tokenPath,
		Logger:        n.cfg.Logger,
		Registerer:    n.reg,
		Gatherer:      n.reg,
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

// minTokenLen is the shortest token read from the file: 32 random bytes
// make 43 characters in base64url.
const minTokenLen = 32

// ErrTokenExposed: the token file may be read by other users.
var ErrTokenExposed = errors.New("the API token file is readable by other users")

// loadOrCreateToken reads the API token at path, or makes one (32 random
// bytes, base64url, 0600) when there is none. A file others may read is
// refused, as ssh refuses such a key: whoever reads it may use the API
// from anywhere. A file that holds no usable token (empty, cut short by a
// crash) is replaced: the token names no identity, clients read it anew.
func (n *Node) loadOrCreateToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := checkTokenMode(path); err != nil {
			return "", err
		}
		if tok := strings.TrimSpace(string(b)); validToken(tok) {
			return tok, nil
		}
		n.log.Warn("the API token file holds no usable token: making a new one", "path", path)
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("api token: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("api token: %w", err)
	}
	tok := base64.RawURLEncoding.EncodeToString(raw)
	if err := writeFileAtomic(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("api token: %w", err)
	}
	n.log.Info("made the API token", "path", path)
	return tok, nil
}

// checkTokenMode refuses a token file group or others may read (on
// systems with Unix permissions).
func checkTokenMode(path string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("api token: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("api token %s (mode %04o): %w: make it private (chmod 600 %s), or remove it to make a new token", path, perm, ErrTokenExposed, path)
	}
	return nil
}

// validToken: long enough, and only characters that travel in a header.
func validToken(tok string) bool {
	if len(tok) < minTokenLen {
		return false
	}
	for _, r := range tok {
		if r <= ' ' || r > '~' {
			return false
		}
	}
	return true
}
