package main

// The bootstrap profile: what it fills, what it refuses, and what it drops
// with a warning.

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestLoadConfig_BootstrapFiles: under the bootstrap profile a files root
// set only by the environment (the container image sets FILES_PATH for every
// command, and docker cannot unset it) is dropped and recorded for serve's
// warning; one from the config file or a flag is still refused.
func TestLoadConfig_BootstrapFiles(t *testing.T) {
	dir := t.TempDir()
	filesConf := writeFile(t, dir, "files.yml", "files: /srv/conf\n")
	noFilesConf := writeFile(t, dir, "nofiles.yml", "profile: bootstrap\nfiles: \"\"\n")
	for _, tc := range []struct {
		name       string
		env        map[string]string
		config     string
		flags      map[string][]string
		ignoredSrc string // the variable dropped; "" = none
		wantFiles  string
		errSrc     string // "" = no error
		byFlag     bool
	}{
		{name: "FILES_PATH", env: map[string]string{"FILES_PATH": "/srv/files"}, flags: map[string][]string{"profile": {"bootstrap"}},
			ignoredSrc: "environment FILES_PATH"},
		{name: "METANODE_FILES", env: map[string]string{"METANODE_FILES": "/srv/files", "METANODE_PROFILE": "bootstrap"},
			ignoredSrc: "environment METANODE_FILES"},
		{name: "bootstrap.yml and FILES_PATH", env: map[string]string{"FILES_PATH": "/srv/files"}, config: "../../configs/bootstrap.yml",
			ignoredSrc: "environment FILES_PATH"},
		{name: "profile home keeps it", env: map[string]string{"FILES_PATH": "/srv/files"}, wantFiles: "/srv/files"},
		{name: "flag", env: map[string]string{"FILES_PATH": "/srv/files"}, flags: map[string][]string{"profile": {"bootstrap"}, "files": {"/srv/flag"}},
			errSrc: "flag --files", byFlag: true},
		{name: "file", config: filesConf, flags: map[string][]string{"profile": {"bootstrap"}},
			errSrc: "config file " + filesConf + " line 1"},
		// files: "" asks for no watcher: the image's variable is dropped
		// as ever, not blamed on that line (review 10, R10-3).
		{name: `files: "" under FILES_PATH`, env: map[string]string{"FILES_PATH": "/srv/files"}, config: noFilesConf,
			ignoredSrc: "environment FILES_PATH"},
		{name: "file under FILES_PATH", env: map[string]string{"FILES_PATH": "/srv/files"}, config: filesConf, flags: map[string][]string{"profile": {"bootstrap"}},
			errSrc: "environment FILES_PATH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"HOME": dir}
			for k, v := range tc.env {
				env[k] = v
			}
			got, layers, err := LoadConfig(loadOptions{getenv: envMap(env), configPath: tc.config, flags: tc.flags})
			if tc.errSrc != "" {
				var ce *ConfigError
				if !errors.As(err, &ce) || ce.Field != "files" || ce.Source != tc.errSrc || ce.ByFlag != tc.byFlag ||
					!strings.Contains(ce.Error(), "a bootstrap node runs no file watcher") {
					t.Fatalf("err = %v (%+v), want files refused from %q (by flag %v)", err, ce, tc.errSrc, tc.byFlag)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Files != tc.wantFiles {
				t.Errorf("files = %q, want %q", got.Files, tc.wantFiles)
			}
			if tc.ignoredSrc == "" {
				if len(layers.ignored) != 0 {
					t.Errorf("ignored %+v, want none", layers.ignored)
				}
				return
			}
			want := []ignoredSetting{{field: "files", value: "/srv/files", source: tc.ignoredSrc, why: "a bootstrap node runs no file watcher"}}
			if !slices.Equal(layers.ignored, want) {
				t.Errorf("ignored %+v, want %+v", layers.ignored, want)
			}
			if layers.set["files"] || got.NodeConfig().FilesRoot != "" {
				t.Errorf("files still set (%v) or handed to the node (%q)", layers.set["files"], got.NodeConfig().FilesRoot)
			}
		})
	}
}

// TestRun_BootstrapIgnoresFilesFromEnvironment: serve under the bootstrap
// profile with FILES_PATH set (as the container image sets it) starts, runs
// no watcher, and says once, at WARN, that the variable was ignored.
func TestRun_BootstrapIgnoresFilesFromEnvironment(t *testing.T) {
	files := t.TempDir() // exists: a watcher on it would report ok
	url, logs, stop := serveInProcess(t, map[string]string{"HOME": t.TempDir(), "FILES_PATH": files},
		"--data", t.TempDir(), "--profile", "bootstrap")
	r := runCLI(t, map[string]string{"METANODE_API": url}, nil, "health")
	r.want(t, 0, "health")
	var h struct{ Checks map[string]string }
	if err := json.Unmarshal([]byte(r.stdout), &h); err != nil || h.Checks["watcher"] != "off" {
		t.Fatalf("health %s (%v): want the watcher off", r.stdout, err)
	}
	if c := stop(); c != 0 {
		t.Fatalf("serve after cancel: exit %d: %s", c, logs.String())
	}
	var warns []string
	for _, line := range strings.Split(logs.String(), "\n") {
		var m struct{ Level, Msg, Value, From string }
		if json.Unmarshal([]byte(line), &m) == nil && m.Level == "WARN" && strings.HasPrefix(m.Msg, "files ignored") {
			if m.Msg != "files ignored: a bootstrap node runs no file watcher" || m.Value != files || m.From != "environment FILES_PATH" {
				t.Errorf("warning %s: want the reason, the value and the variable", line)
			}
			warns = append(warns, line)
		}
	}
	if len(warns) != 1 {
		t.Fatalf("%d warnings about files, want 1:\n%s", len(warns), logs.String())
	}
}

// TestLoadConfig_BootstrapProfileDefaults: the profile alone gives what
// configs/bootstrap.yml sets (README says the two differ only in the data
// directory and the log format), and a value any layer sets wins over it.
func TestLoadConfig_BootstrapProfileDefaults(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"HOME": dir}
	profile, _, err := LoadConfig(loadOptions{getenv: envMap(env), flags: map[string][]string{"profile": {"bootstrap"}}})
	if err != nil {
		t.Fatal(err)
	}
	if profile.MDNS || profile.MaxConns != 512 || !slices.Equal(profile.Listen, BootstrapListen) || profile.Trust != "open" || profile.MemoryLimit != "off" {
		t.Fatalf("--profile bootstrap alone:\n%s", profile)
	}
	yml, _, err := LoadConfig(loadOptions{getenv: envMap(env), configPath: "../../configs/bootstrap.yml"})
	if err != nil {
		t.Fatal(err)
	}
	if yml.Data == profile.Data || yml.LogFormat == profile.LogFormat {
		t.Fatalf("bootstrap.yml's data (%s) and log format (%s) are the profile's: README's list of differences is stale", yml.Data, yml.LogFormat)
	}
	yml.Data, yml.LogFormat = profile.Data, profile.LogFormat
	if !equalConfig(profile, yml) {
		t.Fatalf("--profile bootstrap:\n%s\nconfigs/bootstrap.yml (data and log format aside):\n%s", profile, yml)
	}

	conf := writeFile(t, dir, "c.yml", "profile: bootstrap\nmdns: true\nmax-conns: 9\nlisten: /ip4/127.0.0.1/tcp/4001\n")
	for _, tc := range []struct {
		name   string
		env    map[string]string
		config string
		flags  map[string][]string
	}{
		{name: "flags", flags: map[string][]string{"profile": {"bootstrap"}, "mdns": {"true"}, "max-conns": {"9"}, "listen": {"/ip4/127.0.0.1/tcp/4001"}}},
		{name: "environment", env: map[string]string{"METANODE_PROFILE": "bootstrap", "METANODE_MDNS": "true", "METANODE_MAX_CONNS": "9", "METANODE_LISTEN": "/ip4/127.0.0.1/tcp/4001"}},
		{name: "config file", config: conf},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := map[string]string{"HOME": dir}
			for k, v := range tc.env {
				e[k] = v
			}
			got, _, err := LoadConfig(loadOptions{getenv: envMap(e), configPath: tc.config, flags: tc.flags})
			if err != nil {
				t.Fatal(err)
			}
			if got.Profile != "bootstrap" || !got.MDNS || got.MaxConns != 9 || !slices.Equal(got.Listen, []string{"/ip4/127.0.0.1/tcp/4001"}) {
				t.Fatalf("explicit mdns, max-conns and listen lost to the profile:\n%s", got)
			}
		})
	}
}
