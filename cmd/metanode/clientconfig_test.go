package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metanode/metanode/node"
)

// TestRun_ClientIgnoresUnrelatedConfig: a client command reads only the
// API address from the config serve would read (review 2.1: `files:
// ${MEDIA_DIR}` in the default data directory's file, with MEDIA_DIR set
// only where serve runs, made a plain `metanode status` fail). Nothing
// listens on 127.0.0.1:1, so "no node answers at http://127.0.0.1:1" shows
// that the address was taken from the file and nothing else stopped it.
func TestRun_ClientIgnoresUnrelatedConfig(t *testing.T) {
	dir := t.TempDir()
	def := filepath.Join(dir, ".local", "share", "metanode")
	other := filepath.Join(dir, "other")
	for _, d := range []string{def, other} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	body := "files: ${MEDIA_DIR}\nhttp: 127.0.0.1:1\ntrust: bogus\nbogus-key: 1\n"
	writeFile(t, def, "metanode.yml", body)
	writeFile(t, other, "metanode.yml", body)
	conf := writeFile(t, dir, "c.yml", body)
	const want = "no node answers at http://127.0.0.1:1"
	for _, tc := range []struct {
		env  map[string]string
		args []string
	}{
		{map[string]string{"HOME": dir}, nil},
		{map[string]string{"HOME": dir, "METANODE_LOG_LEVEL": "verbose", "METANODE_MAX_CONNS": "x"}, nil},
		{map[string]string{"HOME": dir, "METANODE_DATA": other}, nil},
		{map[string]string{"HOME": dir}, []string{"--config", conf}},
		{map[string]string{"HOME": dir, "METANODE_CONFIG": conf}, nil},
	} {
		for _, cmd := range [][]string{{"status"}, {"trust", "ls"}, {"health"}} {
			args := append(append([]string{}, cmd...), tc.args...)
			r := runCLI(t, tc.env, nil, args...)
			r.want(t, 1, args...)
			if !strings.Contains(r.stderr, want) {
				t.Errorf("metanode %v with %v: stderr %q, want %q", args, tc.env, r.stderr, want)
			}
		}
	}
	// id too: it needs only the data directory and the listen addresses
	// (operations.md's restore has the other home run it).
	keyed := filepath.Join(dir, "keyed")
	if r := runCLI(t, map[string]string{"HOME": dir}, nil, "init", "--data", keyed); r.code != 0 {
		t.Fatalf("init: %d %s", r.code, r.stderr)
	}
	writeFile(t, keyed, "metanode.yml", body+"listen: [/ip4/127.0.0.1/tcp/4107]\n")
	for _, args := range [][]string{{"id", "--field", "uid", "--data", keyed}, {"id", "--data", keyed, "--api", "http://127.0.0.1:1"}} {
		r := runCLI(t, map[string]string{"HOME": dir}, nil, args...)
		r.want(t, 0, args...)
		if !strings.HasPrefix(r.stdout, "z") && !strings.Contains(r.stdout, "/tcp/4107/p2p/") {
			t.Errorf("metanode %v with an unset ${MEDIA_DIR} in the config: %q", args, r.stdout)
		}
	}
	// serve still refuses the file.
	r := runCLI(t, map[string]string{"HOME": dir}, nil, "serve", "--config", conf)
	r.want(t, 1, "serve --config", conf)
	if !strings.Contains(r.stderr, "MEDIA_DIR") {
		t.Fatalf("serve with an unset variable: %q", r.stderr)
	}
	// The address itself wrong is still an error, naming it.
	for _, tc := range []struct{ body, want string }{
		{"http: ${API_ADDR}\n", "unset variable ${API_ADDR}"},
		{"http: nowhere\n", "config http"},
	} {
		c := writeFile(t, dir, "bad.yml", tc.body)
		r := runCLI(t, map[string]string{"HOME": dir}, nil, "status", "--config", c)
		r.want(t, 1, "status with", tc.body)
		if !strings.Contains(r.stderr, tc.want) {
			t.Errorf("status with %q: stderr %q, want %q", tc.body, r.stderr, tc.want)
		}
	}
	// A file that is not YAML cannot give the address: the default is used
	// (which may or may not answer here), and the file is not complained of.
	for _, body := range []string{"files: [\n", "- a list\n"} {
		writeFile(t, other, "metanode.yml", body)
		r = runCLI(t, map[string]string{"HOME": dir, "METANODE_DATA": other}, nil, "status")
		if strings.Contains(r.stderr, "config") {
			t.Fatalf("status with data-dir config %q: %q", body, r.stderr)
		}
	}
}

// TestRun_ServeTruthInDataDirByOtherPath: --data mn --truth-db $PWD/mn/truth.db
// is one directory: serve runs (review 2.3: it locked itself out and blamed
// "another metanode"), and a second node on it is told to change --data.
func TestRun_ServeTruthInDataDirByOtherPath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	env := map[string]string{"HOME": dir}
	truth := filepath.Join(dir, "mn", "truth.db")
	_, _, stop := serveInProcess(t, env, "--data", "mn", "--truth-db", truth)
	args := []string{"serve", "--data", filepath.Join(dir, "mn"), "--truth-db", "mn/truth.db",
		"--http", "127.0.0.1:0", "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns", "--no-beacon", "--log-level", "error"}
	r := runCLI(t, env, nil, args...)
	r.want(t, 1, args...)
	if !strings.Contains(r.stderr, "another --data") || strings.Contains(r.stderr, "--truth-db") {
		t.Fatalf("a second node on the same directory: %q", r.stderr)
	}
	if c := stop(); c != 0 {
		t.Fatalf("serve exit %d", c)
	}
}

// TestRun_IDNodeElsewhere: id on the data directory of a running node
// that does not answer at the configured API address (started with another
// --http) says so, since the addresses it prints are then the config's,
// not the node's (review s11 B3); asked at the node's own address, it
// prints the node's and says nothing.
func TestRun_IDNodeElsewhere(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "a")
	n := node.New(node.Config{DataDir: data, HTTPAddr: "127.0.0.1:0", Listen: []string{"/ip4/127.0.0.1/tcp/0"},
		Logger: slog.New(slog.DiscardHandler)})
	if err := n.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	env := map[string]string{"HOME": dir, "METANODE_HTTP": "127.0.0.1:1"} // nothing answers there
	r := runCLI(t, env, nil, "id", "--data", data)
	r.want(t, 0, "id")
	if !strings.Contains(r.stderr, "a node runs on "+data+" but did not answer at http://127.0.0.1:1") || !strings.Contains(r.stdout, `"addrsFrom": "config"`) {
		t.Fatalf("id of a node elsewhere: stdout %q stderr %q", r.stdout, r.stderr)
	}
	// Asked for no address, it has nothing to warn about.
	r = runCLI(t, env, nil, "id", "--data", data, "--field", "uid")
	r.want(t, 0, "id")
	if r.stderr != "" {
		t.Fatalf("id --field uid of a node elsewhere: stderr %q", r.stderr)
	}
	r = runCLI(t, env, nil, "id", "--data", data, "--api", n.APIURL())
	r.want(t, 0, "id")
	if r.stderr != "" || !strings.Contains(r.stdout, `"addrsFrom": "node"`) {
		t.Fatalf("id --api of the node: stdout %q stderr %q", r.stdout, r.stderr)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, env, nil, "id", "--data", data) // stopped: nothing to say
	r.want(t, 0, "id")
	if r.stderr != "" {
		t.Fatalf("id of a stopped node: stderr %q", r.stderr)
	}
}
