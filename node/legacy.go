package node

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/metanode/metanode/store"
)

// openLegacyWriter loads (or makes) the legacy writer key: the signer of
// the unsigned writes local services send to the single-box core's routes
// (PATCH /meta/{h}, …; docs/http.md "Legacy writes"). It is a local writer
// like any plugin: trusted and vouched for at its first write (auto-trust),
// its claims shared with paired homes. None when they are refused.
func (n *Node) openLegacyWriter() error {
	if n.cfg.RefuseLegacyWrites {
		return nil
	}
	if n.cfg.LegacyKeyPath == "" {
		return errors.New("legacy writer key: no data directory or key path")
	}
	s, created, err := loadOrCreateKey(n.cfg.LegacyKeyPath)
	if errors.Is(err, store.ErrBadKeyFile) {
		return fmt.Errorf("legacy writer key: %w: an empty or damaged %s: restore it from your backup, or move it away to make a new one (the old key's votes stay until you distrust its uid)",
			err, filepath.Base(n.cfg.LegacyKeyPath))
	}
	if err != nil {
		return fmt.Errorf("legacy writer key: %w", err)
	}
	if created {
		n.log.Info("made a legacy writer key", "path", n.cfg.LegacyKeyPath, "uid", s.UID())
	}
	n.legacy = s
	return nil
}

// LegacyUID is the uid of the key that signs legacy writes ("" when they
// are refused, or before Open).
func (n *Node) LegacyUID() string {
	if n.legacy == nil {
		return ""
	}
	return n.legacy.UID()
}
