package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
			if err := writeJoinConfig(path, inv, "/data/swarm.key", nil); err != nil {
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
		if err := writeJoinConfig(path, inv, "", nil); err != nil {
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
		if err := writeJoinConfig(path, inv, "", nil); err != nil {
			t.Fatal(err)
		}
		cfg := load(t, path)
		if cfg.Swarm != "family" || cfg.SwarmKey != "" || !slices.Equal(cfg.Bootstrap, wantBoot) {
			t.Fatalf("config: swarm %q key %q bootstrap %v", cfg.Swarm, cfg.SwarmKey, cfg.Bootstrap)
		}
	})
	t.Run("GivenFlags", func(t *testing.T) {
		// The serve flags given to join land in the file (replacing a
		// value there), so a later plain serve runs the same node.
		given := map[string]any{"http": "127.0.0.1:9002", "listen": []string{"/ip4/127.0.0.1/tcp/4102"},
			"mdns": false, "bootstrap": []string{"/ip4/10.0.0.1/tcp/4001/p2p/" + c}}
		for _, old := range []string{"", "http: 127.0.0.1:9100\nmdns: true\n"} {
			path := filepath.Join(t.TempDir(), "metanode.yml")
			if old != "" {
				if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := writeJoinConfig(path, inv, "", given); err != nil {
				t.Fatal(err)
			}
			cfg := load(t, path)
			want := append(slices.Clone(wantBoot), "/ip4/10.0.0.1/tcp/4001/p2p/"+c)
			if cfg.HTTP != "127.0.0.1:9002" || cfg.MDNS || !slices.Equal(cfg.Listen, []string{"/ip4/127.0.0.1/tcp/4102"}) ||
				cfg.Swarm != "family" || !slices.Equal(cfg.Bootstrap, want) {
				t.Fatalf("over %q:\n%s", old, cfg)
			}
		}
	})
	t.Run("NotAMapping", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "metanode.yml")
		if err := os.WriteFile(path, []byte("- a\n- b\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := writeJoinConfig(path, inv, "", nil); err == nil {
			t.Fatal("a list config was rewritten")
		}
	})
}

func TestSwarmKeyFile(t *testing.T) {
	dir := t.TempDir()
	key := "/key/swarm/psk/1.0.0/\n/base16/\n" + strings.Repeat("ab", 32) + "\n"
	path, isNew, err := checkSwarmKeyFile(dir, key)
	if err != nil || !isNew || path != filepath.Join(dir, node.SwarmKeyFile) {
		t.Fatalf("%q %v %v", path, isNew, err)
	}
	// The config names the key: a relative --data must not make it relative
	// to wherever the next serve starts.
	t.Chdir(dir)
	if rel, _, err := checkSwarmKeyFile(".", key); err != nil || !filepath.IsAbs(rel) {
		t.Fatalf("key path for --data .: %q, %v", rel, err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("the check wrote the key")
	}
	if err := writeSwarmKey(path, key); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	if _, isNew, err := checkSwarmKeyFile(dir, key); err != nil || isNew {
		t.Fatalf("same key again: new %v, %v", isNew, err)
	}
	if _, _, err := checkSwarmKeyFile(dir, strings.Replace(key, "ab", "cd", 1)); err == nil {
		t.Fatal("another swarm's key would replace the old one")
	}
	if err := writeSwarmKey(path, key); err == nil {
		t.Fatal("writeSwarmKey overwrote a key")
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
	inviter := openInviter(t, dir, keyFile)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inv, err := inviter.Invite(ctx, time.Hour)
	if err != nil || !inv.Private || inv.Swarm != "family" {
		t.Fatalf("invite %+v: %v", inv, err)
	}

	env := map[string]string{"HOME": dir}
	joinArgs := func(data string) []string {
		return []string{"join", inv.Code, "--data", data, "--http", "127.0.0.1:0",
			"--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns", "--no-beacon", "--log-level", "error"}
	}
	// unchanged checks that a failed join left data's config as it was
	// and wrote no swarm key.
	unchanged := func(t *testing.T, data string, conf []byte) {
		t.Helper()
		got, err := os.ReadFile(filepath.Join(data, node.ConfigFile))
		if conf == nil && !errors.Is(err, fs.ErrNotExist) || conf != nil && string(got) != string(conf) {
			t.Errorf("a failed join changed %s: %q (%v), was %q", node.ConfigFile, got, err, conf)
		}
		if _, err := os.Stat(filepath.Join(data, node.SwarmKeyFile)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a failed join wrote %s (%v)", node.SwarmKeyFile, err)
		}
	}

	// A data directory in use: refused before anything is written.
	busy := filepath.Join(dir, "busy")
	conf := []byte("# mine\nhttp: 127.0.0.1:9100\n")
	if err := os.MkdirAll(busy, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(busy, node.ConfigFile), conf, 0o600); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(busy, node.LockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if holdLock(t, lock) {
		r := runCLI(t, env, nil, joinArgs(busy)...)
		r.want(t, 1, "join into a data directory in use")
		if !strings.Contains(r.stderr, "stop that node first") || r.stdout != "" {
			t.Errorf("join into a busy data directory: stdout %q stderr %q", r.stdout, r.stderr)
		}
		unchanged(t, busy, conf)
	}

	b := filepath.Join(dir, "b")
	stdout, _ := joinUntilDone(t, ctx, env, joinArgs(b), false)

	if stdout != "" {
		t.Errorf("join wrote to stdout: %q", stdout)
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

	// The code is used: a third home is refused, and neither its config
	// nor a swarm key is written (the next serve would join that swarm).
	third := filepath.Join(dir, "c")
	r := runCLI(t, env, nil, joinArgs(third)...)
	r.want(t, 1, "join with a used code")
	if !strings.Contains(r.stderr, "pairing refused") || strings.Count(r.stderr, "new code") != 1 || r.stdout != "" {
		t.Errorf("join with a used code: stdout %q stderr %q", r.stdout, r.stderr)
	}
	unchanged(t, third, nil)
}

// TestRun_JoinInterest: an interest node does not wait for the inviter's
// claims it will never keep (walk3 P3: "syncing 1 of 5154", 30 s, then
// "the rest arrive as peers sync", which they never do); it says what it
// keeps and is done once paired.
func TestRun_JoinInterest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two nodes")
	}
	dir := t.TempDir()
	inviter := openInviter(t, dir, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := map[string]string{"HOME": dir}
	signer, err := store.GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "plugin.key")
	if err := signer.WriteFile(keyFile); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // claims about cids the joiner has no file of
		runCLI(t, env, nil, "claim", "put", "--api", inviter.APIURL(), "--signer", keyFile,
			"--cid", testCID(i), "--key", "title", "--value", fmt.Sprint("t", i)).want(t, 0)
	}
	inv, err := inviter.Invite(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	_, stderr := joinUntilDone(t, ctx, env, []string{"join", inv.Code, "--data", filepath.Join(dir, "b"), "--replicate", "interest",
		"--http", "127.0.0.1:0", "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns", "--no-beacon", "--log-level", "error"}, true)
	if out := stderr; !strings.Contains(out, "joining: done (replicate: interest") || strings.Contains(out, "the rest arrive") {
		t.Fatalf("join progress of an interest node:\n%s", out)
	}
}

// testCID is a valid cid of no file here, one per i.
func testCID(i int) string {
	d := sha256.Sum256([]byte(fmt.Sprint("test cid ", i)))
	return store.MidhashCID(d[:])
}

// openInviter opens a node of swarm "family" on loopback in dir/a (a
// private swarm when keyFile is set), closed when the test ends.
func openInviter(t *testing.T, dir, keyFile string) *node.Node {
	t.Helper()
	n := node.New(node.Config{DataDir: filepath.Join(dir, "a"), HTTPAddr: "127.0.0.1:0",
		Listen: []string{"/ip4/127.0.0.1/tcp/0"}, SwarmName: "family", SwarmKeyPath: keyFile,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := n.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// joinUntilDone runs `metanode join` in process until it reports that it
// is done (or, when soFar, that it stopped waiting), stops the node it
// serves and returns its stdout and stderr; any other end fails the test.
func joinUntilDone(t *testing.T, ctx context.Context, env map[string]string, args []string, soFar bool) (stdout, stderr string) {
	t.Helper()
	errb, outb := &lockedBuffer{}, &lockedBuffer{}
	c := &cli{stdin: strings.NewReader(""), stdout: outb, stderr: errb, getenv: envMap(env)}
	joinCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan int, 1)
	go func() { done <- c.run(joinCtx, args) }()
	finished := func() bool {
		s := errb.String()
		return strings.Contains(s, "joining: done") || soFar && strings.Contains(s, "so far")
	}
	deadline := time.Now().Add(time.Minute)
	for !finished() {
		select {
		case code := <-done:
			t.Fatalf("join exited %d before pairing:\n%s", code, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			stop()
			<-done
			t.Fatalf("join did not finish within a minute:\n%s", errb.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	if code := <-done; code != 0 {
		t.Fatalf("join exit %d after its context ended:\n%s", code, errb.String())
	}
	return outb.String(), errb.String()
}

// TestRun_JoinInterruptedBeforePairing: a join stopped before the inviter
// answered did not pair: it exits 1 (a script must not take it for a
// success) and leaves the config as it was (review s11 B4).
func TestRun_JoinInterruptedBeforePairing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node")
	}
	dir := t.TempDir()
	inviter := openInviter(t, dir, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inv, err := inviter.Invite(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := inviter.Close(); err != nil { // its addresses are dead now
		t.Fatal(err)
	}
	data := filepath.Join(dir, "b")
	errb, outb := &lockedBuffer{}, &lockedBuffer{}
	c := &cli{stdin: strings.NewReader(""), stdout: outb, stderr: errb, getenv: envMap(map[string]string{"HOME": dir})}
	joinCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan int, 1)
	go func() {
		done <- c.run(joinCtx, []string{"join", inv.Code, "--data", data, "--http", "127.0.0.1:0",
			"--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns", "--no-beacon", "--log-level", "error"})
	}()
	waitFor(t, func() bool { return strings.Contains(errb.String(), "attempt 1 of") }, "a failed attempt to reach the inviter")
	stop() // as SIGINT does
	select {
	case code := <-done:
		if code != 1 || !strings.Contains(errb.String(), "interrupted before pairing") {
			t.Fatalf("interrupted join: exit %d, stderr %q", code, errb.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("join did not stop")
	}
	if _, err := os.Stat(filepath.Join(data, node.ConfigFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("an interrupted join wrote %s (%v)", node.ConfigFile, err)
	}
}
