package main

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
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
	inv := testInvite(t)
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

// TestJoinPersisted_TruthFromEnvironment: a truth database given by the
// environment (META_CORE_DB_PATH) is written into the config join writes:
// the truth holds the pairing, so the hint's restart without that variable
// would run an unpaired node on an empty truth (review 3.1).
func TestJoinPersisted_TruthFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	data, truth := filepath.Join(dir, "n3"), filepath.Join(dir, "db", "truth.db")
	env := map[string]string{"HOME": dir, "METANODE_DATA": data, "META_CORE_DB_PATH": truth}
	conf := filepath.Join(data, node.ConfigFile)
	cfg, layers, err := LoadConfig(loadOptions{getenv: envMap(env), fileBytes: []byte("\n")})
	if err != nil {
		t.Fatal(err)
	}
	given, _, err := joinPersisted(cfg, layers, nil, conf)
	if err != nil {
		t.Fatal(err)
	}
	inv := testInvite(t)
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeJoinConfig(conf, inv, "", given); err != nil {
		t.Fatal(err)
	}
	got, _, err := LoadConfig(loadOptions{getenv: envMap(map[string]string{"HOME": dir}), configPath: conf})
	if err != nil {
		t.Fatal(err)
	}
	if got.TruthDB != truth {
		t.Fatalf("the restart without META_CORE_DB_PATH uses truth %q, want %q", got.TruthDB, truth)
	}
}

// TestJoinPersisted_ServeSettingsFromEnvironment: every serve setting the
// environment gave join is written into its config, as a flag's would be,
// so the printed restart (run without those variables) serves on the same
// addresses (review W6: it listened on :9000 and 0.0.0.0:4001 with mDNS).
// A flag still wins over its variable, a value only in the file is not
// copied, and the code's swarm is not overridden by METANODE_SWARM.
func TestJoinPersisted_ServeSettingsFromEnvironment(t *testing.T) {
	inv := testInvite(t)
	dir := t.TempDir()
	t.Chdir(dir) // the relative FILES_PATH below is relative to here
	env := map[string]string{
		"HOME":               dir,
		"METANODE_HTTP":      "127.0.0.1:19704",
		"METANODE_LISTEN":    "/ip4/127.0.0.1/tcp/14704,/ip4/127.0.0.1/udp/14704/quic-v1",
		"METANODE_MDNS":      "false",
		"METANODE_MAX_CONNS": "12",
		"METANODE_SWARM":     "other",
		"FILES_PATH":         "media",
		"METANODE_LOG_LEVEL": "warn", // overridden by the flag below
	}
	flags := map[string][]string{"log-level": {"error"}}
	for _, tc := range []struct {
		name, data, conf string
	}{
		{"ConfigInDataDir", filepath.Join(dir, "d1"), ""},
		{"ConfigElsewhere", filepath.Join(dir, "d2"), filepath.Join(dir, "etc", "d2.yml")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := maps.Clone(env)
			env["METANODE_DATA"] = tc.data
			conf := tc.conf
			if conf == "" {
				conf = filepath.Join(tc.data, node.ConfigFile)
			}
			if err := os.MkdirAll(filepath.Dir(conf), 0o700); err != nil {
				t.Fatal(err)
			}
			// A setting only in the file stays the file's business.
			if err := os.WriteFile(conf, []byte("replicate: interest\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, layers, err := LoadConfig(loadOptions{getenv: envMap(env), configPath: tc.conf, flags: flags})
			if err != nil {
				t.Fatal(err)
			}
			given, next, err := joinPersisted(cfg, layers, flags, conf)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"swarm", "replicate"} {
				if v, ok := given[k]; ok {
					t.Errorf("given %s: %v, want it left to the code or the file", k, v)
				}
			}
			if err := writeJoinConfig(conf, inv, "", given); err != nil {
				t.Fatal(err)
			}
			// The restart: no variables but HOME, and the hint's flag.
			restart := loadOptions{getenv: envMap(map[string]string{"HOME": dir}), configPath: tc.conf}
			if want := "metanode serve --config " + tc.conf; tc.conf != "" && next != want {
				t.Fatalf("hint %q, want %q", next, want)
			}
			if want := "metanode serve --data " + tc.data; tc.conf == "" {
				if next != want {
					t.Fatalf("hint %q, want %q", next, want)
				}
				restart.flags = map[string][]string{"data": {tc.data}}
			}
			got, _, err := LoadConfig(restart)
			if err != nil {
				t.Fatal(err)
			}
			wantListen := []string{"/ip4/127.0.0.1/tcp/14704", "/ip4/127.0.0.1/udp/14704/quic-v1"}
			if got.HTTP != "127.0.0.1:19704" || !slices.Equal(got.Listen, wantListen) || got.MDNS ||
				got.MaxConns != 12 || got.Files != filepath.Join(dir, "media") || got.LogLevel != "error" ||
				got.Swarm != "family" || got.Replicate != "interest" || got.Data != tc.data {
				t.Fatalf("the restart without the variables:\n%s", got)
			}
		})
	}
}

// testInvite is an invitation of swarm "family" from a fresh inviter at a
// loopback address (nothing listens there: these tests only write configs).
func testInvite(t *testing.T) node.Invite {
	t.Helper()
	s, err := store.GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := node.PeerID(s)
	if err != nil {
		t.Fatal(err)
	}
	return node.Invite{Swarm: "family", UID: s.UID(), Addrs: []string{"/ip4/127.0.0.1/tcp/4001/p2p/" + pid.String()}}
}
