package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/store"
)

// TestJoinPersisted_DataFromEnvironment: a data directory given by
// METANODE_DATA is kept where the restart finds it without that variable
// (review 2.4: with the config outside the data directory, the hint
// 'metanode serve --config FILE' started an unpaired node on the default
// data directory): written into that config, or --data in the hint.
func TestJoinPersisted_DataFromEnvironment(t *testing.T) {
	s, err := store.GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := node.PeerID(s)
	if err != nil {
		t.Fatal(err)
	}
	inv := node.Invite{Swarm: "family", UID: s.UID(), Addrs: []string{"/ip4/127.0.0.1/tcp/4001/p2p/" + pid.String()}}
	dir := t.TempDir()
	data := filepath.Join(dir, "n2")
	env := map[string]string{"HOME": dir, "METANODE_DATA": data}
	vals := map[string][]string{"http": {"127.0.0.1:9100"}}

	// The config outside the data directory: it gets data:.
	conf := filepath.Join(dir, "etc", "mn.yml")
	if err := os.MkdirAll(filepath.Dir(conf), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg, layers, err := LoadConfig(loadOptions{getenv: envMap(env), configPath: conf, fileBytes: []byte("\n"), flags: vals})
	if err != nil {
		t.Fatal(err)
	}
	given, next, err := joinPersisted(cfg, layers, vals, conf)
	if err != nil {
		t.Fatal(err)
	}
	if next != "metanode serve --config "+conf {
		t.Fatalf("hint %q", next)
	}
	if err := writeJoinConfig(conf, inv, "", given); err != nil {
		t.Fatal(err)
	}
	got, _, err := LoadConfig(loadOptions{getenv: envMap(map[string]string{"HOME": dir}), configPath: conf})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data != data || got.HTTP != "127.0.0.1:9100" {
		t.Fatalf("the hint's serve, without METANODE_DATA: data %q http %q, want %q and 127.0.0.1:9100", got.Data, got.HTTP, data)
	}

	// The config in the data directory: the hint says --data.
	conf = filepath.Join(data, node.ConfigFile)
	cfg, layers, err = LoadConfig(loadOptions{getenv: envMap(env), fileBytes: []byte("\n"), flags: vals})
	if err != nil {
		t.Fatal(err)
	}
	given, next, err = joinPersisted(cfg, layers, vals, conf)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := given["data"]; ok || !strings.HasSuffix(next, " --data "+data) {
		t.Fatalf("config in the data directory: given %v, hint %q", given, next)
	}
}
