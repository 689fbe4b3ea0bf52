package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metanode/metanode/node"
)

// A config file named for join (--config or METANODE_CONFIG) that does not
// exist yet is an empty config, not an error: join writes it (review W6).
func TestJoinLoadConfig_MissingFile(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "new", "dir", "mn.yml")
	for _, tc := range []struct {
		name, flag string
		env        map[string]string
	}{
		{"Flag", conf, map[string]string{"HOME": dir}},
		{"Environment", "", map[string]string{"HOME": dir, "METANODE_CONFIG": conf}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cli{getenv: envMap(tc.env)}
			cfg, layers, path, err := c.joinLoadConfig(map[string][]string{"http": {"127.0.0.1:9101"}}, tc.flag)
			if err != nil {
				t.Fatalf("missing config: %v", err)
			}
			if path != conf || layers.file != "" || cfg.HTTP != "127.0.0.1:9101" {
				t.Fatalf("path %q, file read %q, http %q", path, layers.file, cfg.HTTP)
			}
		})
	}
	// A bad value given by flag is still a usage error (exit 2).
	c := &cli{getenv: envMap(map[string]string{"HOME": dir})}
	_, _, _, err := c.joinLoadConfig(map[string][]string{"http": {"nonsense"}}, conf)
	var ue *usageError
	if !errors.As(err, &ue) {
		t.Fatalf("bad --http over a missing config: %v, want a usage error", err)
	}
	// A config that exists but cannot be read is still refused.
	_, _, _, err = c.joinLoadConfig(nil, dir) // a directory
	if err == nil || !strings.Contains(err.Error(), "check --config") {
		t.Fatalf("a directory as config: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(conf)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("loading made the config's directory: %v", err)
	}
}

func TestPrepareConfigDir(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "a", "b", "mn.yml")
	if err := prepareConfigDir(conf); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(dir, "a"), filepath.Dir(conf)} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v %v, want a directory 0700", d, fi, err)
		}
	}
	if left, _ := os.ReadDir(filepath.Dir(conf)); len(left) != 0 {
		t.Fatalf("the write check left %v", left)
	}
	// Under a regular file (this also fails for root, unlike a mode).
	file := writeFile(t, dir, "plain", "x")
	if err := prepareConfigDir(filepath.Join(file, "mn.yml")); err == nil || !strings.Contains(err.Error(), "choose a path you can write") {
		t.Fatalf("config under a file: %v", err)
	}
}

// join --config NEW.yml in a directory not made yet, with the serve
// settings in the environment, in process against a real inviter: a config
// whose directory cannot be made is refused before the code is presented (the same
// code then still pairs), and the paired join creates the file (0600, its
// directory 0700) holding what the restart without the variables needs.
func TestRun_JoinNewConfigFile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two nodes")
	}
	dir := t.TempDir()
	inviter := openInviter(t, dir, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inv, err := inviter.Invite(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "b")
	env := map[string]string{"HOME": dir, "METANODE_HTTP": "127.0.0.1:0",
		"METANODE_LISTEN": "/ip4/127.0.0.1/tcp/0", "METANODE_MDNS": "false", "METANODE_LOG_LEVEL": "error"}

	// Its directory cannot be made (a dangling symlink: a volume not
	// mounted; a mode would not stop root): refused up front, before
	// the node starts or the code is presented.
	gone := filepath.Join(dir, "unmounted")
	if err := os.Symlink(filepath.Join(dir, "nowhere"), gone); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, env, nil, "join", inv.Code, "--data", data, "--config", filepath.Join(gone, "mn.yml"))
	r.want(t, 1, "join with a config in a directory that cannot be made")
	if !strings.Contains(r.stderr, "choose a path you can write") || strings.Contains(r.stderr, "joining:") {
		t.Fatalf("join with a config in a directory that cannot be made: %q", r.stderr)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused join made the data directory: %v", err)
	}

	conf := filepath.Join(dir, "etc", "metanode", "b.yml")
	_, stderr := joinUntilDone(t, ctx, env, []string{"join", inv.Code, "--data", data, "--config", conf}, false)
	if !strings.Contains(stderr, "next time: metanode serve --config "+conf+")") {
		t.Errorf("hint: %s", stderr)
	}
	if fi, err := os.Stat(conf); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the config join wrote: %v %v, want mode 0600", fi, err)
	}
	if fi, err := os.Stat(filepath.Dir(conf)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("its directory: %v %v, want mode 0700", fi, err)
	}
	got, _, err := LoadConfig(loadOptions{getenv: envMap(map[string]string{"HOME": dir}), configPath: conf})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data != data || got.HTTP != "127.0.0.1:0" || !slices.Equal(got.Listen, []string{"/ip4/127.0.0.1/tcp/0"}) ||
		got.MDNS || got.Swarm != "family" || len(got.Bootstrap) == 0 {
		t.Fatalf("the restart without the variables:\n%s", got)
	}
	joiner, _, err := node.LoadOrCreateIdentity(filepath.Join(data, node.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if !inviter.Store().Trusted(joiner.UID()) {
		t.Fatal("the inviter does not trust the joiner's node uid")
	}
}
