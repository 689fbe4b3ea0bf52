package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/pnet"

	"github.com/metanode/metanode/store"
)

func join(dir, name string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, name)
}

// EnsureDataDir creates dir (mode 0700) when it does not exist.
func EnsureDataDir(dir string) error {
	if dir == "" {
		return errors.New("data directory: no path given")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	return nil
}

// LoadOrCreateIdentity reads the node key at path, or makes one (0600) when
// the file does not exist; created says which. A file that holds no key
// (empty after an interrupted write, cut short, garbage) is an error that
// says what to do, never replaced.
func LoadOrCreateIdentity(path string) (signer *store.Signer, created bool, err error) {
	s, created, err := loadOrCreateKey(path)
	if errors.Is(err, store.ErrBadKeyFile) {
		// Never a new key in its place on our own: the key is the node's
		// identity, and the owner may well have a backup of it.
		return nil, false, fmt.Errorf("node identity: %w: an empty or damaged %s: restore it from your backup (docs/operations.md), or move it away to make a new identity (peers will see a new node)",
			err, filepath.Base(path))
	}
	if err != nil {
		return nil, false, fmt.Errorf("node identity: %w", err)
	}
	return s, created, nil
}

// loadOrCreateKey reads the signer key at path, or makes one (0600) when
// the file does not exist. A file that holds no key is store.ErrBadKeyFile,
// never replaced.
func loadOrCreateKey(path string) (signer *store.Signer, created bool, err error) {
	s, err := store.LoadSigner(path)
	if err == nil {
		// A crash after the link and before the temporary file's removal
		// leaves a copy of the key beside it; nothing else would remove it.
		store.RemoveStaleKeyTemps(path)
		return s, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	s, err = store.GenerateSigner()
	if err != nil {
		return nil, false, err
	}
	if err := s.WriteFile(path); err != nil {
		if errors.Is(err, fs.ErrExist) { // another process made it first: use theirs
			s, err = store.LoadSigner(path)
			return s, false, err
		}
		return nil, false, err
	}
	return s, true, nil
}

// PeerID is the libp2p peer id of a node key: the swarm builds its host key
// from the same secp256k1 scalar, so uid and peer id name one key.
func PeerID(s *store.Signer) (peer.ID, error) {
	k, err := crypto.UnmarshalSecp256k1PrivateKey(s.PrivateKey().Serialize())
	if err != nil {
		return "", fmt.Errorf("peer id: %w", err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		return "", fmt.Errorf("peer id: %w", err)
	}
	return id, nil
}

// ReadSwarmKey reads a pre-shared key in go-ipfs swarm.key format
// ("/key/swarm/psk/1.0.0/", "/base16/", 64 hex digits).
func ReadSwarmKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("swarm key: %w", err)
	}
	defer f.Close()
	psk, err := pnet.DecodeV1PSK(f)
	if err != nil {
		return nil, fmt.Errorf("swarm key %s: not in swarm.key format (/key/swarm/psk/1.0.0/, /base16/, 64 hex digits): %w", path, err)
	}
	return psk, nil
}
