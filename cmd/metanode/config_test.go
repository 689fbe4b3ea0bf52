package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func envMap(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadConfig_Defaults(t *testing.T) {
	home := t.TempDir()
	got, layers, err := LoadConfig(loadOptions{getenv: envMap(map[string]string{"HOME": home})})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.Data = filepath.Join(home, ".local", "share", "metanode")
	if !equalConfig(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if layers.file != "" || len(layers.set) != 0 {
		t.Fatalf("layers = %+v, want none", layers)
	}
}

func equalConfig(a, b Config) bool { return a.String() == b.String() }

func TestDefaultDataDir(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"METANODE_DATA": "/a", "XDG_DATA_HOME": "/x", "HOME": "/h"}, "/a"},
		{map[string]string{"XDG_DATA_HOME": "/x", "HOME": "/h"}, "/x/metanode"},
		{map[string]string{"HOME": "/h"}, "/h/.local/share/metanode"},
	} {
		if got := defaultDataDir(envMap(tc.env)); got != tc.want {
			t.Errorf("defaultDataDir(%v) = %q, want %q", tc.env, got, tc.want)
		}
	}
}

// TestLoadConfig_Precedence sets each of a few settings in several layers
// and checks the highest layer wins: defaults < YAML < env < flags.
func TestLoadConfig_Precedence(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "c.yml", `
http: 127.0.0.1:9100
swarm: from-yaml
trust: open
max-conns: 10
listen: [/ip4/127.0.0.1/tcp/5000]
mdns: false
log-level: debug
`)
	env := map[string]string{
		"HOME":                dir,
		"METANODE_SWARM":      "from-env",
		"METANODE_MAX_CONNS":  "20",
		"META_CORE_HTTP_PORT": "9200",
		"FILES_PATH":          "/files/env",
		"META_CORE_DB_PATH":   "/db/truth-env.db",
		"METANODE_LISTEN":     "/ip4/127.0.0.1/tcp/6000, /ip4/127.0.0.1/udp/6000/quic-v1",
	}
	flags := map[string][]string{
		"max-conns": {"30"},
		"listen":    {"/ip4/127.0.0.1/tcp/7000", "/ip4/127.0.0.1/tcp/7001"},
		"mdns":      {"true", "false", "true"},
	}
	got, layers, err := LoadConfig(loadOptions{getenv: envMap(env), configPath: path, flags: flags})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, got, want string
	}{
		{"http (env META_CORE_HTTP_PORT over yaml)", got.HTTP, "127.0.0.1:9200"},
		{"swarm (env over yaml)", got.Swarm, "from-env"},
		{"trust (yaml over default)", got.Trust, "open"},
		{"max-conns (flag over env over yaml)", valueString(&got.MaxConns), "30"},
		{"listen (repeated flag)", strings.Join(got.Listen, " "), "/ip4/127.0.0.1/tcp/7000 /ip4/127.0.0.1/tcp/7001"},
		{"mdns (last flag wins over yaml)", valueString(&got.MDNS), "true"},
		{"files (FILES_PATH)", got.Files, "/files/env"},
		{"truth-db (META_CORE_DB_PATH)", got.TruthDB, "/db/truth-env.db"},
		{"log-level (yaml)", got.LogLevel, "debug"},
		{"replicate (default)", got.Replicate, "all"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if layers.file != path {
		t.Errorf("layers.file = %q, want %q", layers.file, path)
	}

	// METANODE_HTTP beats the upstream variable; a comma list in env.
	env["METANODE_HTTP"] = "127.0.0.1:9300"
	got, _, err = LoadConfig(loadOptions{getenv: envMap(env), configPath: path})
	if err != nil {
		t.Fatal(err)
	}
	if got.HTTP != "127.0.0.1:9300" || strings.Join(got.Listen, " ") != "/ip4/127.0.0.1/tcp/6000 /ip4/127.0.0.1/udp/6000/quic-v1" {
		t.Errorf("http, listen = %q, %q", got.HTTP, got.Listen)
	}
}

func TestLoadConfig_FileInDataDir(t *testing.T) {
	data := t.TempDir()
	writeFile(t, data, "metanode.yml", "swarm: in-data-dir\n")
	got, layers, err := LoadConfig(loadOptions{getenv: envMap(map[string]string{"METANODE_DATA": data})})
	if err != nil {
		t.Fatal(err)
	}
	if got.Swarm != "in-data-dir" || layers.file == "" {
		t.Fatalf("swarm = %q, file = %q: want the data dir's metanode.yml read", got.Swarm, layers.file)
	}
	// --data on the command line decides where to look.
	other := t.TempDir()
	got, _, err = LoadConfig(loadOptions{getenv: envMap(map[string]string{"METANODE_DATA": other}), flags: map[string][]string{"data": {data}}})
	if err != nil || got.Swarm != "in-data-dir" {
		t.Fatalf("with --data: swarm = %q, err = %v", got.Swarm, err)
	}
	// A missing --config is an error, a missing <data>/metanode.yml is not.
	if _, _, err := LoadConfig(loadOptions{getenv: envMap(nil), configPath: filepath.Join(other, "nope.yml"), flags: map[string][]string{"data": {other}}}); err == nil {
		t.Fatal("missing --config file: no error")
	}
}

func TestLoadConfig_ExpandsVariables(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "c.yml", "files: ${MEDIA}/films\ndata: ~/node\n")
	got, _, err := LoadConfig(loadOptions{getenv: envMap(map[string]string{"MEDIA": "/srv/media", "HOME": "/home/u"}), configPath: path})
	if err != nil {
		t.Fatal(err)
	}
	if got.Files != "/srv/media/films" || got.Data != "/home/u/node" {
		t.Fatalf("files, data = %q, %q", got.Files, got.Data)
	}
}

// An unset ${VAR} is an error naming the variable, the file and the line
// (it used to become "" silently: `files: ${MEDIA_DIR}` ran no watcher);
// ${VAR:-default} gives a default, comments and a bare $ are left alone.
func TestLoadConfig_VariableForms(t *testing.T) {
	dir := t.TempDir()
	env := envMap(map[string]string{"HOME": "/home/u", "PORT": "9100"})
	path := writeFile(t, dir, "ok.yml", "# ${NOT_SET} in a comment\nhttp: 127.0.0.1:${PORT}  # ${ALSO_NOT_SET}\n"+
		"files: ${MEDIA_DIR:-/srv/media}\nswarm: ${SWARM:-}home\ncache-db: /c/$HOME/x.db\n")
	got, _, err := LoadConfig(loadOptions{getenv: env, configPath: path})
	if err != nil {
		t.Fatal(err)
	}
	if got.HTTP != "127.0.0.1:9100" || got.Files != "/srv/media" || got.Swarm != "home" || got.CacheDB != "/c/$HOME/x.db" {
		t.Fatalf("expanded:\n%s", got)
	}
	for _, tc := range []struct{ body, want string }{
		{"http: 127.0.0.1:9000\nlisten:\n  - /ip4/127.0.0.1/tcp/4001\nfiles: ${MEDIA_DIR}\n", "line 4: unset variable ${MEDIA_DIR}"},
		{"files: ${MEDIA_DIR\n", "line 1: \"${MEDIA_DIR\" has no closing }"},
		{"files: ${1X}\n", "line 1: ${1X}: want ${NAME}"},
	} {
		path := writeFile(t, dir, "bad.yml", tc.body)
		_, _, err := LoadConfig(loadOptions{getenv: env, configPath: path})
		if err == nil || !strings.Contains(err.Error(), "config file "+path+" "+tc.want) {
			t.Errorf("%q: %v, want %q", tc.body, err, tc.want)
		}
	}
	path = writeFile(t, dir, "unset.yml", "files: ${MEDIA_DIR}\n")
	if _, _, err := LoadConfig(loadOptions{getenv: env, configPath: path}); !errors.Is(err, ErrUnsetVariable) {
		t.Fatalf("unset variable: %v, want ErrUnsetVariable", err)
	}
	r := runCLI(t, map[string]string{"HOME": dir}, nil, "serve", "--config", path, "--data", filepath.Join(dir, "d"))
	r.want(t, 1, "serve with an unset variable")
	if !strings.Contains(r.stderr, "MEDIA_DIR") || !strings.Contains(r.stderr, "line 1") {
		t.Fatalf("serve with an unset variable: %q", r.stderr)
	}
}

// TestLoadConfig_ListFromOneValue: a list setting written as one value is
// the list of its comma-separated parts, as in the environment: a variable
// can then hold a list (bootstrap: ${PEERS}), and one address needs no [ ].
func TestLoadConfig_ListFromOneValue(t *testing.T) {
	dir := t.TempDir()
	a := "/ip4/127.0.0.1/tcp/4001/p2p/16Uiu2HAm7VwKCS6oRo2FPbus3uMVQPAsJvrPop9TR9zTpu9J4Uic"
	b := "/ip4/127.0.0.2/tcp/4001/p2p/16Uiu2HAm7VwKCS6oRo2FPbus3uMVQPAsJvrPop9TR9zTpu9J4Uic"
	env := envMap(map[string]string{"HOME": dir, "PEERS": a + ", " + b})
	path := writeFile(t, dir, "c.yml", "bootstrap: ${PEERS}\nlisten: /ip4/127.0.0.1/tcp/4101\n")
	got, _, err := LoadConfig(loadOptions{getenv: env, configPath: path})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Bootstrap, []string{a, b}) || !slices.Equal(got.Listen, []string{"/ip4/127.0.0.1/tcp/4101"}) {
		t.Fatalf("bootstrap %q, listen %q", got.Bootstrap, got.Listen)
	}
}

// TestLoadConfig_Errors: every bad input names the setting at fault.
func TestLoadConfig_Errors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		yaml  string
		env   map[string]string
		flags map[string][]string
		field string
	}{
		{name: "unknown key", yaml: "http: 127.0.0.1:1\nswarm-name: x\n", field: "swarm-name"},
		{name: "nested unknown", yaml: "log:\n  level: debug\n", field: "log"},
		{name: "int in yaml", yaml: "max-conns: many\n", field: "max-conns"},
		{name: "list in yaml", yaml: "listen: {a: b}\n", field: "listen"},
		{name: "bool in yaml", yaml: "mdns: sometimes\n", field: "mdns"},
		{name: "twice", yaml: "swarm: a\nswarm: b\n", field: "swarm"},
		{name: "trust value", yaml: "trust: maybe\n", field: "trust"},
		{name: "replicate value", env: map[string]string{"METANODE_REPLICATE": "some"}, field: "replicate"},
		{name: "profile value", flags: map[string][]string{"profile": {"server"}}, field: "profile"},
		{name: "int in env", env: map[string]string{"METANODE_MAX_CONNS": "x"}, field: "max-conns"},
		{name: "zero conns", flags: map[string][]string{"max-conns": {"0"}}, field: "max-conns"},
		{name: "bool flag", flags: map[string][]string{"auto-trust-local": {"perhaps"}}, field: "auto-trust-local"},
		{name: "http", yaml: "http: nine-thousand\n", field: "http"},
		{name: "http port", env: map[string]string{"META_CORE_HTTP_PORT": "99999"}, field: "http"},
		{name: "listen", flags: map[string][]string{"listen": {"tcp://0.0.0.0:4001"}}, field: "listen"},
		{name: "allowed host with a port", env: map[string]string{"METANODE_HTTP_ALLOWED_HOSTS": "metanode:9000"}, field: "http-allowed-hosts"},
		{name: "allowed host as a URL", yaml: "http-allowed-hosts: [http://media.example.org]\n", field: "http-allowed-hosts"},
		{name: "no listen", yaml: "listen: []\n", field: "listen"},
		{name: "bootstrap without peer", yaml: "bootstrap: [/ip4/1.2.3.4/tcp/4001]\n", field: "bootstrap"},
		{name: "swarm name", yaml: "swarm: a/b\n", field: "swarm"},
		{name: "swarm name charset", flags: map[string][]string{"swarm": {"home$net"}}, field: "swarm"},
		{name: "relay without peer", env: map[string]string{"METANODE_RELAYS": "/ip4/1.2.3.4/tcp/4001"}, field: "relays"},
		{name: "log level", yaml: "log-level: loud\n", field: "log-level"},
		{name: "log format", yaml: "log-format: xml\n", field: "log-format"},
		{name: "memory limit unit", env: map[string]string{"METANODE_MEMORY_LIMIT": "512MB"}, field: "memory-limit"},
		{name: "memory limit too small", flags: map[string][]string{"memory-limit": {"16MiB"}}, field: "memory-limit"},
		{name: "bootstrap with files", yaml: "profile: bootstrap\nfiles: /srv\n", field: "files"},
		{name: "bootstrap with interest", yaml: "profile: bootstrap\nreplicate: interest\n", field: "replicate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			env := map[string]string{"HOME": dir}
			for k, v := range tc.env {
				env[k] = v
			}
			opt := loadOptions{getenv: envMap(env), flags: tc.flags}
			if tc.yaml != "" {
				opt.configPath = writeFile(t, dir, "c.yml", tc.yaml)
			}
			_, _, err := LoadConfig(opt)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *ConfigError", err)
			}
			if ce.Field != tc.field || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("err = %v (field %q), want it to name %q", err, ce.Field, tc.field)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %q: want one line", err)
			}
		})
	}
}

// TestLoadConfig_UpstreamPort: META_CORE_HTTP_PORT is a port, as upstream;
// anything else is refused with the value as given and where host:port goes.
func TestLoadConfig_UpstreamPort(t *testing.T) {
	home := t.TempDir()
	got, _, err := LoadConfig(loadOptions{getenv: envMap(map[string]string{"HOME": home, "META_CORE_HTTP_PORT": "9123"})})
	if err != nil || got.HTTP != "127.0.0.1:9123" {
		t.Fatalf("port 9123: %q %v", got.HTTP, err)
	}
	for _, v := range []string{":9000", "0.0.0.0:9000", "http"} {
		_, _, err := LoadConfig(loadOptions{getenv: envMap(map[string]string{"HOME": home, "META_CORE_HTTP_PORT": v})})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != "http" || ce.Value != v ||
			!strings.Contains(err.Error(), "META_CORE_HTTP_PORT") || !strings.Contains(err.Error(), "METANODE_HTTP") {
			t.Errorf("META_CORE_HTTP_PORT=%q: %v", v, err)
		}
	}
}

func TestLoadConfig_UnknownKeyIsSentinel(t *testing.T) {
	dir := t.TempDir()
	_, _, err := LoadConfig(loadOptions{getenv: envMap(map[string]string{"HOME": dir}), configPath: writeFile(t, dir, "c.yml", "colour: blue\n")})
	if !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), `"colour"`) && !strings.Contains(err.Error(), "colour") {
		t.Fatalf("err = %v, want ErrUnknownKey naming colour", err)
	}
}

func TestLoadConfig_Profile(t *testing.T) {
	dir := t.TempDir()
	env := envMap(map[string]string{"HOME": dir})
	got, _, err := LoadConfig(loadOptions{getenv: env, flags: map[string][]string{"profile": {"bootstrap"}}})
	if err != nil {
		t.Fatal(err)
	}
	nc := got.NodeConfig()
	if got.Trust != "open" || !nc.DHTServer || !nc.RelayService || !nc.PeerExchange || nc.FilesRoot != "" || got.MemoryLimit != "off" {
		t.Fatalf("bootstrap: trust %q, node config %+v", got.Trust, nc)
	}
	// An explicit trust or memory limit wins over the profile's default.
	got, _, err = LoadConfig(loadOptions{getenv: env, flags: map[string][]string{"profile": {"bootstrap"}, "trust": {"list"}, "memory-limit": {"auto"}}})
	if err != nil || got.Trust != "list" || got.MemoryLimit != "auto" {
		t.Fatalf("bootstrap with --trust list --memory-limit auto: trust %q, memory limit %q, err %v", got.Trust, got.MemoryLimit, err)
	}
	// A home: no relay, no peer exchange; auto-trust off maps to NoAutoTrust.
	got, _, err = LoadConfig(loadOptions{getenv: env, flags: map[string][]string{"auto-trust-local": {"false"}, "mdns": {"false"}}})
	if err != nil {
		t.Fatal(err)
	}
	nc = got.NodeConfig()
	if nc.RelayService || nc.PeerExchange || nc.Public || !nc.NoAutoTrust || nc.MDNS || nc.DHTServer || string(nc.Trust) != "list" {
		t.Fatalf("home: node config %+v", nc)
	}
}

// TestShippedConfigs parses and validates every configs/*.yml and the
// template init writes (which must equal the embedded defaults).
func TestShippedConfigs(t *testing.T) {
	files, err := filepath.Glob("../../configs/*.yml")
	if err != nil || len(files) < 2 {
		t.Fatalf("configs/*.yml: %v, %v", files, err)
	}
	home := t.TempDir()
	for _, f := range files {
		if filepath.Base(f) == "compose.yml" {
			continue // Docker Compose's, not the node's (configs/compose_test.go)
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, layers, err := LoadConfig(loadOptions{getenv: envMap(map[string]string{"HOME": home}), configPath: f})
			if err != nil {
				t.Fatal(err)
			}
			if len(layers.set) == 0 {
				t.Fatal("the example sets nothing")
			}
			if filepath.Base(f) == "bootstrap.yml" && (c.Profile != "bootstrap" || c.Trust != "open") {
				t.Fatalf("bootstrap.yml: profile %q trust %q", c.Profile, c.Trust)
			}
		})
	}
	t.Run("default.yml", func(t *testing.T) {
		path := writeFile(t, t.TempDir(), "metanode.yml", defaultYAML)
		got, layers, err := LoadConfig(loadOptions{getenv: envMap(map[string]string{"HOME": home}), configPath: path})
		if err != nil {
			t.Fatal(err)
		}
		want := DefaultConfig()
		want.Data = got.Data
		if len(layers.set) != 0 || !equalConfig(got, want) {
			t.Fatalf("init's template: got %+v (set %v), want the defaults", got, layers.set)
		}
		// Uncommenting every line must give the same defaults back.
		// Uncommenting every setting line must give the same defaults back.
		var kept []string
		for _, l := range strings.Split(defaultYAML, "\n") {
			if len(l) > 1 && l[0] == '#' && (l[1] >= 'a' && l[1] <= 'z' || l[1] == ' ' && l[2] == ' ') && !strings.HasPrefix(l, "#data:") {
				kept = append(kept, l[1:])
			}
		}
		path = writeFile(t, t.TempDir(), "metanode.yml", strings.Join(kept, "\n"))
		got, layers, err = LoadConfig(loadOptions{getenv: envMap(map[string]string{"HOME": home}), configPath: path})
		if err != nil {
			t.Fatal(err)
		}
		if !equalConfig(got, want) || len(layers.set) != len(settings)-1 {
			t.Fatalf("uncommented template: got %+v, set %d keys; want the defaults, every key but data", got, len(layers.set))
		}
	})
}

// FuzzConfigYAML: no input crashes the loader, and every error is one line.
func FuzzConfigYAML(f *testing.F) {
	f.Add("http: 127.0.0.1:9000\n")
	f.Add("listen: [a, b]\nmdns: yes\n")
	f.Add("- a\n- b\n")
	f.Add("max-conns: 99999999999999999999\n")
	f.Add("{bad")
	f.Add("a: &x [*x]\n")
	f.Add(defaultYAML)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, body string) {
		path := filepath.Join(dir, "c.yml")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := LoadConfig(loadOptions{getenv: envMap(map[string]string{"HOME": dir}), configPath: path})
		if err != nil && err.Error() == "" {
			t.Fatal("empty error")
		}
	})
}

// TestServeFlags parses real command lines through serve's flag set.
func TestServeFlags(t *testing.T) {
	home := t.TempDir()
	for _, tc := range []struct {
		args  []string
		check func(c Config) bool
	}{
		{[]string{"--no-mdns"}, func(c Config) bool { return !c.MDNS }},
		{[]string{"--mdns=false"}, func(c Config) bool { return !c.MDNS }},
		{[]string{"--no-mdns", "--mdns"}, func(c Config) bool { return c.MDNS }},
		{[]string{"--no-mdns=false"}, func(c Config) bool { return c.MDNS }},
		{[]string{"--listen", "/ip4/127.0.0.1/tcp/1", "--listen=/ip4/127.0.0.1/tcp/2"}, func(c Config) bool {
			return strings.Join(c.Listen, " ") == "/ip4/127.0.0.1/tcp/1 /ip4/127.0.0.1/tcp/2"
		}},
		{[]string{"--profile", "bootstrap", "--max-conns", "7"}, func(c Config) bool {
			return c.Profile == "bootstrap" && c.Trust == "open" && c.MaxConns == 7 && c.NodeConfig().Public
		}},
		{[]string{"--http-allowed-hosts", "metanode", "--http-allowed-hosts=media.example.org"}, func(c Config) bool {
			return slices.Equal(c.NodeConfig().HTTPAllowed, []string{"metanode", "media.example.org"})
		}},
		{[]string{"--http", "127.0.0.1:0", "--files", "~/media"}, func(c Config) bool {
			return c.HTTP == "127.0.0.1:0" && c.Files == filepath.Join(home, "media")
		}},
	} {
		c := &cli{getenv: envMap(map[string]string{"HOME": home})}
		fl := c.flagSet("serve", "serve", "")
		vals, configPath := configFlags(fl)
		if _, err := c.parse(fl, tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		got, _, err := c.loadConfig(vals, *configPath)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if !tc.check(got) {
			t.Errorf("%v: got\n%s", tc.args, got)
		}
	}
}

// TestLoadConfig_OneDocument: a second YAML document (after "---") would be
// dropped unread, its settings lost without a word (trust: open here):
// it is refused, naming its line. A lone "---" or an empty second
// document is harmless.
func TestLoadConfig_OneDocument(t *testing.T) {
	home := t.TempDir()
	load := func(yml string) (Config, error) {
		c, _, err := LoadConfig(loadOptions{getenv: envMap(map[string]string{"HOME": home}),
			configPath: writeFile(t, home, "m.yml", yml)})
		return c, err
	}
	for _, yml := range []string{"mdns: false\n---\ntrust: open\n", "mdns: false\n---\ntrust: [\n"} {
		if _, err := load(yml); err == nil || !strings.Contains(err.Error(), "m.yml") {
			t.Errorf("%q: err = %v, want an error naming the file", yml, err)
		}
	}
	if _, err := load("mdns: false\n---\ntrust: open\n"); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("second document: err = %v, want it to name line 3", err)
	}
	for _, yml := range []string{"---\ntrust: open\n", "trust: open\n---\n", "trust: open\n...\n"} {
		if c, err := load(yml); err != nil || c.Trust != "open" {
			t.Errorf("%q: trust %q, %v", yml, c.Trust, err)
		}
	}
}
