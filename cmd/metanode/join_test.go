package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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
	t.Run("PrivateToPublic", func(t *testing.T) {
		// A home in a private swarm joins a public one: the old key and the
		// old swarm's peers go, or every dial fails the handshake.
		path := filepath.Join(t.TempDir(), "metanode.yml")
		old := "swarm: priv\nswarm-key: /data/swarm.key\nbootstrap:\n  - /ip4/10.0.0.1/tcp/4001/p2p/" + c + "\n"
		if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := writeJoinConfig(path, inv, ""); err != nil {
			t.Fatal(err)
		}
		cfg := load(t, path)
		if cfg.Swarm != "family" || cfg.SwarmKey != "" || !slices.Equal(cfg.Bootstrap, wantBoot) {
			t.Fatalf("config: swarm %q key %q bootstrap %v", cfg.Swarm, cfg.SwarmKey, cfg.Bootstrap)
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

// join into a private swarm, in process: the code's key lands in the data
// directory, the config names the swarm, and the two nodes pair over the
// pre-shared key.
func TestRun_JoinPrivateSwarm(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two nodes")
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "swarm.key")
	key := "/key/swarm/psk/1.0.0/\n/base16/\n" + strings.Repeat("5a", 32) + "\n"
	if err := os.WriteFile(keyFile, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	inviter := node.New(node.Config{DataDir: filepath.Join(dir, "a"), HTTPAddr: "127.0.0.1:0",
		Listen: []string{"/ip4/127.0.0.1/tcp/0"}, SwarmName: "family", SwarmKeyPath: keyFile,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := inviter.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer inviter.Close()
	inv, err := inviter.Invite(ctx, time.Hour)
	if err != nil || !inv.Private || inv.Swarm != "family" {
		t.Fatalf("invite %+v: %v", inv, err)
	}

	b := filepath.Join(dir, "b")
	stderr := &lockedBuffer{}
	c := &cli{stdin: strings.NewReader(""), stdout: io.Discard, stderr: stderr, getenv: envMap(map[string]string{"HOME": dir})}
	joinCtx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() {
		done <- c.run(joinCtx, []string{"join", inv.Code, "--data", b, "--http", "127.0.0.1:0",
			"--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns", "--log-level", "error"})
	}()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(stderr.String(), "joining: done") {
		select {
		case code := <-done:
			t.Fatalf("join exited %d before pairing:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("join did not finish within a minute:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	if code := <-done; code != 0 {
		t.Fatalf("join exit %d after its context ended:\n%s", code, stderr.String())
	}

	if got, err := os.ReadFile(filepath.Join(b, node.SwarmKeyFile)); err != nil || string(got) != key {
		t.Fatalf("swarm key in the joiner's data dir: %q, %v", got, err)
	}
	cfg, _, err := LoadConfig(loadOptions{getenv: envMap(nil), flags: map[string][]string{"data": {b}}})
	if err != nil || cfg.Swarm != "family" || cfg.SwarmKey != filepath.Join(b, node.SwarmKeyFile) || len(cfg.Bootstrap) == 0 {
		t.Fatalf("joiner's config: swarm %q key %q bootstrap %v, %v", cfg.Swarm, cfg.SwarmKey, cfg.Bootstrap, err)
	}
	joiner, _, err := node.LoadOrCreateIdentity(filepath.Join(b, node.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if !inviter.Store().Trusted(joiner.UID()) {
		t.Fatal("the inviter does not trust the joiner's node uid")
	}
}
