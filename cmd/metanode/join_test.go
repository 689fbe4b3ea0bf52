package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/store"
)

// join writes the swarm into the config: appended to a file without those
// keys (its comments kept), merged into one that has them, idempotent.
func TestWriteJoinConfig(t *testing.T) {
	pid := func() string {
		s, err := store.GenerateSigner()
		if err != nil {
			t.Fatal(err)
		}
		id, err := node.PeerID(s)
		if err != nil {
			t.Fatal(err)
		}
		return id.String()
	}
	a, b, c := pid(), pid(), pid()
	inv := node.Invite{Swarm: "family", UID: "zQ3shX",
		Addrs:     []string{"/ip4/127.0.0.1/tcp/4001/p2p/" + a},
		Bootstrap: []string{"/ip4/127.0.0.2/tcp/4001/p2p/" + b}}
	load := func(t *testing.T, path string) Config {
		t.Helper()
		cfg, _, err := LoadConfig(loadOptions{getenv: envMap(nil), configPath: path})
		if err != nil {
			t.Fatalf("the written config does not load: %v", err)
		}
		return cfg
	}
	wantBoot := append(slices.Clone(inv.Addrs), inv.Bootstrap...)

	t.Run("Defaults", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "metanode.yml")
		for range 2 { // twice: the second run changes nothing that matters
			if err := writeJoinConfig(path, inv, "/data/swarm.key"); err != nil {
				t.Fatal(err)
			}
		}
		cfg := load(t, path)
		if cfg.Swarm != "family" || cfg.SwarmKey != "/data/swarm.key" || !slices.Equal(cfg.Bootstrap, wantBoot) {
			t.Fatalf("config: swarm %q key %q bootstrap %v", cfg.Swarm, cfg.SwarmKey, cfg.Bootstrap)
		}
		b, _ := os.ReadFile(path)
		if !strings.Contains(string(b), "#auto-trust-local: true") {
			t.Fatal("the defaults' comments were lost")
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v", fi.Mode())
		}
	})
	t.Run("Merge", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "metanode.yml")
		old := "# my settings\nhttp: 127.0.0.1:9100\nbootstrap:\n  - /ip4/10.0.0.1/tcp/4001/p2p/" + c + "\n"
		if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := writeJoinConfig(path, inv, ""); err != nil {
			t.Fatal(err)
		}
		cfg := load(t, path)
		want := append([]string{"/ip4/10.0.0.1/tcp/4001/p2p/" + c}, wantBoot...)
		if cfg.Swarm != "family" || cfg.SwarmKey != "" || cfg.HTTP != "127.0.0.1:9100" || !slices.Equal(cfg.Bootstrap, want) {
			t.Fatalf("config: swarm %q key %q http %q bootstrap %v", cfg.Swarm, cfg.SwarmKey, cfg.HTTP, cfg.Bootstrap)
		}
	})
	t.Run("NotAMapping", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "metanode.yml")
		if err := os.WriteFile(path, []byte("- a\n- b\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := writeJoinConfig(path, inv, ""); err == nil {
			t.Fatal("a list config was rewritten")
		}
	})
}

func TestWriteSwarmKey(t *testing.T) {
	dir := t.TempDir()
	key := "/key/swarm/psk/1.0.0/\n/base16/\n" + strings.Repeat("ab", 32) + "\n"
	path, err := writeSwarmKey(dir, key)
	if err != nil || path != filepath.Join(dir, node.SwarmKeyFile) {
		t.Fatalf("%q %v", path, err)
	}
	if _, err := writeSwarmKey(dir, key); err != nil {
		t.Fatalf("same key again: %v", err)
	}
	if _, err := writeSwarmKey(dir, strings.Replace(key, "ab", "cd", 1)); err == nil {
		t.Fatal("another swarm's key overwrote the old one")
	}
	if _, err := writeSwarmKey(t.TempDir(), "not a key"); err == nil {
		t.Fatal("garbage key accepted")
	}
}
