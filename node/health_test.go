package node_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// swarmKeyFile writes a fresh go-ipfs swarm.key into dir.
func swarmKeyFile(t *testing.T, dir string) string {
	t.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	path := filepath.Join(dir, "swarm.key")
	if err := os.WriteFile(path, []byte("/key/swarm/psk/1.0.0/\n/base16/\n"+hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNode_HealthDegradedOnWrongSwarmKey: a node whose only bootstrap peer
// uses another swarm key cannot share at all: its /health turns degraded
// and names the mismatch. The bootstrap peer, which has no bootstrap peers
// of its own, stays ok.
func TestNode_HealthDegradedOnWrongSwarmKey(t *testing.T) {
	ctx := context.Background()
	p1cfg := testConfig(t, dataDir(t, "p1"))
	p1cfg.SwarmKeyPath = swarmKeyFile(t, t.TempDir())
	p1 := openNode(t, p1cfg)

	p2cfg := testConfig(t, dataDir(t, "p2"))
	p2cfg.SwarmKeyPath = swarmKeyFile(t, t.TempDir())
	p2cfg.Bootstrap = p1.Addrs()[:1]
	p2 := openNode(t, p2cfg)
	waitFor(t, 60*time.Second, "p2 degraded", func() error {
		if h := p2.Health(ctx); h.Status != "degraded" {
			return errNo
		}
		return nil
	})
	h := p2.Health(ctx)
	if h.Checks["store"] != "ok" || !strings.HasPrefix(h.Checks["swarm"], "cannot share") {
		t.Fatalf("p2's checks: %+v; want the store ok and the swarm unable to share", h.Checks)
	}
	if h := p1.Health(ctx); h.Status != "ok" {
		t.Fatalf("p1 (no bootstrap peers) is %+v", h)
	}
}
