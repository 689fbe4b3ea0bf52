package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"go.uber.org/goleak"

	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/store"
)

func TestMain(m *testing.M) {
	code := m.Run()
	cleanupBinary()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs one command line in-process with its own environment.
func runCLI(t *testing.T, env map[string]string, stdin io.Reader, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	c := &cli{stdin: stdin, stdout: &out, stderr: &errb, getenv: envMap(env)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := c.run(ctx, args)
	return result{code, out.String(), errb.String()}
}

func (r result) want(t *testing.T, code int, args ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("metanode %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
	}
	if code != 0 && strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 {
		t.Fatalf("metanode %s: stderr %q: want a short message", strings.Join(args, " "), r.stderr)
	}
}

func TestRun_HelpAndUsage(t *testing.T) {
	env := map[string]string{"HOME": t.TempDir()}
	r := runCLI(t, env, nil, "--help")
	r.want(t, 0, "--help")
	for _, cmd := range commands {
		if !strings.Contains(r.stdout, cmd.name) {
			t.Errorf("--help does not list %q", cmd.name)
		}
	}
	helps := [][]string{
		{"serve", "--help"}, {"init", "-h"}, {"id", "--help"}, {"keygen", "--help"},
		{"claim", "--help"}, {"claim", "sign", "--help"}, {"claim", "put", "--help"},
		{"get", "--help"}, {"status", "--help"}, {"peers", "--help"}, {"trust", "--help"}, {"health", "--help"},
		{"invite", "--help"}, {"join", "--help"}, {"bench", "--help"}, {"bench", "verify", "--help"},
		{"bench", "swarm", "--help"}, {"version", "--help"}, {"import", "--help"},
	}
	for _, args := range helps {
		r := runCLI(t, env, nil, args...)
		r.want(t, 0, args...)
		if n := strings.Count(r.stdout, "Usage: metanode"); n != 1 {
			t.Errorf("metanode %s: %d usage texts in %q, want one", strings.Join(args, " "), n, r.stdout)
		}
	}
	r = runCLI(t, env, nil, "serve", "--help")
	for _, s := range settings {
		if !strings.Contains(r.stdout, "-"+s.name) {
			t.Errorf("serve --help does not mention --%s", s.name)
		}
	}
	// cli.md: --data has a documented default.
	if !regexp.MustCompile(`-data value\n\s+data directory .*\(default \$XDG_DATA_HOME/metanode, else ~/\.local/share/metanode\)`).MatchString(r.stdout) {
		t.Errorf("serve --help does not give the default of --data:\n%s", r.stdout)
	}
	usage := [][]string{
		{}, {"frobnicate"}, {"serve", "--bogus"}, {"serve", "extra"}, {"get"}, {"get", "a", "b"}, {"get", "notacid"},
		{"trust"}, {"trust", "add"}, {"trust", "add", "not-a-uid"}, {"trust", "wave"}, {"claim"},
		{"claim", "sign"}, {"claim", "sign", "--signer", "k", "--cid", "c", "--key", "k"},
		{"claim", "burn"}, {"bench"}, {"bench", "verify", "--claims", "0"}, {"keygen", "x"},
		{"status", "--api", "ftp://x"}, {"id", "extra"}, {"version", "extra"},
		// Checked before any request: with no node at the default address,
		// a check left to the node would exit 1.
		{"get", "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy", "--as", "bad"},
		{"bench", "swarm", "--only", "fast"}, {"bench", "swarm", "--nodes", "1"},
		{"get", "--bogus", "x"}, {"health", "--wait", "soon"}, {"claim", "sign", "--ts", "yesterday"},
		// A bad value of a setting given as a flag is a usage error too.
		{"serve", "--trust", "bogus"}, {"serve", "--max-conns", "x"}, {"serve", "--http", "nine"},
		{"serve", "--profile", "bootstrap", "--files", "/srv"}, {"init", "--data", ""}, {"id", "--listen", "tcp://x"},
		{"import"}, {"import", "--from-redis", "redis://x", "--from-sqlite", "f"}, {"import", "--from-sqlite", "f", "--layout", "hash"},
		{"import", "--from-redis", "ftp://x"}, {"import", "--from-redis", "redis://x", "--batch", "0"},
	}
	for _, args := range usage {
		r := runCLI(t, env, nil, args...)
		r.want(t, 2, args...)
		if r.stderr == "" {
			t.Errorf("metanode %s: no message", strings.Join(args, " "))
		}
		// stdout is a script's data: a usage error leaves it empty (the
		// help is one --help away, as the message says).
		if r.stdout != "" {
			t.Errorf("metanode %s: a usage error wrote to stdout: %q", strings.Join(args, " "), r.stdout)
		}
	}
}

// TestRun_ConfigErrorNotFromFlags: the same bad value from the environment
// or the config file is an error of the setup, not of the command line.
func TestRun_ConfigErrorNotFromFlags(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "c.yml")
	if err := os.WriteFile(conf, []byte("trust: bogus\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  map[string]string
		args []string
	}{
		{map[string]string{"HOME": dir, "METANODE_TRUST": "bogus"}, []string{"serve"}},
		{map[string]string{"HOME": dir, "METANODE_MAX_CONNS": "x"}, []string{"serve"}},
		{map[string]string{"HOME": dir}, []string{"serve", "--config", conf}},
	} {
		r := runCLI(t, tc.env, nil, tc.args...)
		r.want(t, 1, tc.args...)
		if !strings.Contains(r.stderr, "config ") || r.stdout != "" {
			t.Errorf("%v: stdout %q stderr %q", tc.args, r.stdout, r.stderr)
		}
	}
}

// TestRun_ConfigFileErrors: a bad config file is an error of the setup (exit
// 1) naming the file and line, even when a flag sets the same key; a
// conflict names the variable or the line that set the value.
func TestRun_ConfigFileErrors(t *testing.T) {
	dir := t.TempDir()
	flags := []string{"--data", filepath.Join(dir, "d"), "--http", "127.0.0.1:0", "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns", "--no-beacon"}
	for i, tc := range []struct{ file, want string }{
		{"http: [1,2]\n", `config http = "[1, 2]" (config file %s line 1): want a string`},
		{"listen: {a: b}\n", "(config file %s line 1): want a list of strings"},
		{"swarm: [a]\n", "(config file %s line 1): want a string"},
		{"max-conns: \"64\"\n", "(config file %s line 1): want an integer"},
		{"# c\nbogus: 1\n", "(config file %s line 2): unknown key"},
		{"# c\n\ntrust: bogus\n", `config trust = "bogus" (config file %s line 3): must be one of open, list`},
	} {
		conf := filepath.Join(dir, fmt.Sprintf("c%d.yml", i))
		if err := os.WriteFile(conf, []byte(tc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"serve", "--config", conf}, flags...)
		r := runCLI(t, map[string]string{"HOME": dir}, nil, args...)
		r.want(t, 1, "serve with config", tc.file)
		if want := fmt.Sprintf(tc.want, conf); !strings.Contains(r.stderr, want) || r.stdout != "" {
			t.Errorf("config %q: stderr %q, want %q", tc.file, r.stderr, want)
		}
	}
	filesConf := filepath.Join(dir, "files.yml")
	if err := os.WriteFile(filesConf, []byte("profile: bootstrap\nfiles: /srv/files\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		// A files root in the file is refused under the bootstrap profile,
		// with or without FILES_PATH over it (a variable alone is ignored:
		// TestRun_BootstrapIgnoresFilesFromEnvironment).
		{map[string]string{}, []string{"--config", filesConf}, `config files = "/srv/files" (config file ` + filesConf + ` line 2): a bootstrap node runs no file watcher: remove files from config file ` + filesConf + ` line 2 or use profile home`},
		{map[string]string{"FILES_PATH": "/srv/env"}, []string{"--config", filesConf}, `config files = "/srv/env" (environment FILES_PATH): a bootstrap node runs no file watcher: remove files from config file ` + filesConf + ` line 2`},
		{map[string]string{"METANODE_REPLICATE": "interest", "METANODE_PROFILE": "bootstrap"}, nil, `config replicate = "interest" (environment METANODE_REPLICATE): a bootstrap node keeps every claim`},
		{map[string]string{"METANODE_TRUST": "bogus"}, nil, "(environment METANODE_TRUST)"},
	} {
		tc.env["HOME"] = dir
		args := append(append([]string{"serve"}, flags...), tc.args...)
		r := runCLI(t, tc.env, nil, args...)
		r.want(t, 1, args...)
		if !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v %v: stderr %q, want %q", tc.env, tc.args, r.stderr, tc.want)
		}
	}
}

func TestRun_Version(t *testing.T) {
	r := runCLI(t, nil, nil, "version")
	r.want(t, 0, "version")
	if !strings.HasPrefix(r.stdout, "metanode ") {
		t.Fatalf("version: %q", r.stdout)
	}
	r = runCLI(t, nil, nil, "version", "extra")
	if want := "metanode version: unexpected argument \"extra\"\n"; !strings.HasPrefix(r.stderr, want) || r.code != exitUsage {
		t.Fatalf("version extra: exit %d, stderr %q: want 2 and %q", r.code, r.stderr, want)
	}
}

// TestRun_GetBadAs: get checks --as as trust add checks its uid: a usage
// error naming the flag, in one line, before asking any node.
func TestRun_GetBadAs(t *testing.T) {
	args := []string{"get", "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy", "--as", "zBAD", "--api", "http://127.0.0.1:1"}
	r := runCLI(t, nil, nil, args...)
	r.want(t, exitUsage, args...)
	first, _, _ := strings.Cut(r.stderr, "\n")
	if !strings.HasPrefix(first, "metanode get: --as: bad uid: ") || !strings.Contains(first, `"zBAD"`) || !strings.Contains(first, "metanode id") {
		t.Fatalf("stderr %q: want the flag, the value and where a uid comes from", r.stderr)
	}
}

func TestRun_PairingUsage(t *testing.T) {
	env := map[string]string{"HOME": t.TempDir()}
	code := node.Invite{Swarm: "metamesh", UID: "zifaDC5buR5wtMbc4JghKz4LyaDBZ9JJndobsud8SSsrm", Token: "c2VjcmV0",
		Addrs: []string{"/ip4/127.0.0.1/tcp/4101/p2p/16Uiu2HAkuw5bzWAMCcYDXBpbqhYtCYRVHZvc7ekgxn66tKzyonmB"}}.Code()
	if _, err := node.ParseInvite(code); err != nil {
		t.Fatalf("the whole code does not parse: %v", err)
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"join"}, 2, "pairing code"},
		{[]string{"join", "a", "b"}, 2, "pairing code"},
		{[]string{"join", "hello"}, 2, "not a metanode pairing code"},
		{[]string{"join", "mn1:!!!"}, 2, "the pairing code is incomplete or damaged: copy the whole code"},
		{[]string{"join", "mn1:e30"}, 2, "incomplete or damaged"}, // {}
		{[]string{"join", code[:60]}, 2, "incomplete or damaged"}, // a code cut short
		{[]string{"join", code[:len(code)-3]}, 2, "incomplete or damaged"},
		// The code's uid is not the peer its address names: pairing would
		// authenticate one key and trust another.
		{[]string{"join", code}, 2, "addresses are not its inviter's"},
		{[]string{"invite", "--ttl", "1s"}, 2, "--ttl"},
		{[]string{"invite", "extra"}, 2, "unexpected"},
		{[]string{"invite", "--api", "http://127.0.0.1:1"}, 1, "no node answers"},
	} {
		r := runCLI(t, env, nil, c.args...)
		r.want(t, c.code, c.args...)
		if !strings.Contains(r.stderr, c.msg) {
			t.Errorf("metanode %s: stderr %q, want %q", strings.Join(c.args, " "), r.stderr, c.msg)
		}
	}
}

func TestRun_InitAndID(t *testing.T) {
	data := filepath.Join(t.TempDir(), "node")
	env := map[string]string{"HOME": t.TempDir(), "METANODE_DATA": data}

	r := runCLI(t, env, nil, "id")
	r.want(t, 1, "id")
	if !strings.Contains(r.stderr, "metanode init") {
		t.Fatalf("id before init: %q", r.stderr)
	}

	r = runCLI(t, env, nil, "init")
	r.want(t, 0, "init")
	var first identity
	if err := json.Unmarshal([]byte(r.stdout), &first); err != nil {
		t.Fatalf("init output %q: %v", r.stdout, err)
	}
	if !first.Created || first.DataDir != data {
		t.Fatalf("init: %+v", first)
	}
	for name, mode := range map[string]os.FileMode{"": 0o700, "node.key": 0o600, "metanode.yml": 0o600} {
		st, err := os.Stat(filepath.Join(data, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != mode {
			t.Errorf("%s/%s: mode %v, want %v", data, name, st.Mode().Perm(), mode)
		}
	}

	r = runCLI(t, env, nil, "init")
	r.want(t, 0, "init again")
	var second identity
	if err := json.Unmarshal([]byte(r.stdout), &second); err != nil {
		t.Fatal(err)
	}
	if second.Created || second.UID != first.UID || second.PeerID != first.PeerID {
		t.Fatalf("init again: %+v, first %+v", second, first)
	}

	r = runCLI(t, env, nil, "id", "--listen", "/ip4/127.0.0.1/tcp/4999")
	r.want(t, 0, "id")
	var id identity
	if err := json.Unmarshal([]byte(r.stdout), &id); err != nil {
		t.Fatal(err)
	}
	if id.UID != first.UID || id.PeerID != first.PeerID {
		t.Fatalf("id = %+v, init said %+v", id, first)
	}
	if len(id.Addrs) != 1 || id.Addrs[0] != "/ip4/127.0.0.1/tcp/4999/p2p/"+id.PeerID {
		t.Fatalf("id addrs = %v", id.Addrs)
	}
	for field, want := range map[string]string{"uid": id.UID, "peerId": id.PeerID, "addr": id.Addrs[0]} {
		r := runCLI(t, env, nil, "id", "--listen", "/ip4/127.0.0.1/tcp/4999", "--field", field)
		r.want(t, 0, "id --field", field)
		if got := strings.TrimSpace(r.stdout); got != want {
			t.Errorf("id --field %s = %q, want %q", field, got, want)
		}
	}
	runCLI(t, env, nil, "id", "--field", "name").want(t, 2, "id --field name")
	// The uid and the peer id name one key: the vouch cid is the peer id's cid.
	pid, err := peer.Decode(id.PeerID)
	if err != nil {
		t.Fatal(err)
	}
	cid, err := store.PeerIDCID(id.UID)
	if err != nil {
		t.Fatal(err)
	}
	if got := peer.ToCid(pid).String(); got != cid {
		t.Fatalf("peer id cid %s != PeerIDCID(uid) %s", got, cid)
	}
}

// TestRun_IDOfRunningNode: a node started with flags listens elsewhere than
// its config says; id prints the running node's addresses when its API
// answers for this key, the configured ones otherwise, and says which.
func TestRun_IDOfRunningNode(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	env := map[string]string{"HOME": dir}
	url, _, stop := serveInProcess(t, env, "--data", data)
	id := func(args ...string) identity {
		t.Helper()
		r := runCLI(t, env, nil, append([]string{"id", "--data", data}, args...)...)
		r.want(t, 0, "id", strings.Join(args, " "))
		var got identity
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("id printed %q: %v", r.stdout, err)
		}
		return got
	}
	st := runCLI(t, env, nil, "status", "--api", url)
	st.want(t, 0, "status")
	var status struct{ Addrs []string }
	if err := json.Unmarshal([]byte(st.stdout), &status); err != nil || len(status.Addrs) == 0 {
		t.Fatalf("status %q: %v", st.stdout, err)
	}
	got := id("--api", url)
	if got.AddrsFrom != "node" || !slices.Equal(slices.Sorted(slices.Values(got.Addrs)), slices.Sorted(slices.Values(status.Addrs))) {
		t.Fatalf("id with its node running: from %q addrs %v, the node listens on %v", got.AddrsFrom, got.Addrs, status.Addrs)
	}
	// --listen asks for the configured addresses.
	if got := id("--api", url, "--listen", "/ip4/127.0.0.1/tcp/4999"); got.AddrsFrom != "config" || len(got.Addrs) != 1 || !strings.Contains(got.Addrs[0], "/tcp/4999/") {
		t.Fatalf("id --listen: %+v", got)
	}
	// Another node's API is not this node's.
	otherURL, _, _ := serveInProcess(t, env, "--data", filepath.Join(dir, "other"))
	if got := id("--api", otherURL); got.AddrsFrom != "config" || !strings.Contains(got.Addrs[0], "/tcp/4821/") {
		t.Fatalf("id with another node at --api: %+v", got)
	}
	if c := stop(); c != 0 {
		t.Fatalf("serve exit %d", c)
	}
	if got := id("--api", url); got.AddrsFrom != "config" || !strings.Contains(got.Addrs[0], "/tcp/4821/") {
		t.Fatalf("id with the node stopped: %+v", got)
	}
}

// TestRun_ClientFindsMovedAPI: without --api or METANODE_API, client
// commands find a node whose API moved the documented ways: by
// META_CORE_HTTP_PORT, by http: in --config, or in <data>/metanode.yml.
func TestRun_ClientFindsMovedAPI(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	port := freePort(t)
	url, _, stop := serveInProcess(t, map[string]string{"HOME": dir}, "--data", data, "--http", "127.0.0.1:"+port)
	conf := writeFile(t, dir, "moved.yml", "http: 0.0.0.0:"+port+"\n")
	other := filepath.Join(dir, "other")
	if err := os.MkdirAll(other, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, other, "metanode.yml", "http: 127.0.0.1:"+port+"\n")
	for _, tc := range []struct {
		env  map[string]string
		args []string
	}{
		{map[string]string{"HOME": dir, "META_CORE_HTTP_PORT": port}, nil},
		{map[string]string{"HOME": dir, "METANODE_HTTP": "127.0.0.1:" + port}, nil},
		{map[string]string{"HOME": dir}, []string{"--config", conf}},
		{map[string]string{"HOME": dir, "METANODE_CONFIG": conf}, nil},
		{map[string]string{"HOME": dir}, []string{"--data", other}},
	} {
		for _, cmd := range [][]string{{"health"}, {"status"}, {"trust", "ls"}} {
			args := append(slices.Clone(cmd), tc.args...)
			r := runCLI(t, tc.env, nil, args...)
			r.want(t, 0, append(args, fmt.Sprint(tc.env))...)
		}
		// id reads its key from --data and asks the node it finds.
		args := append([]string{"id", "--data", data}, tc.args...)
		if tc.args != nil && tc.args[0] == "--data" {
			continue // id's --data is the key's directory
		}
		r := runCLI(t, tc.env, nil, args...)
		r.want(t, 0, args...)
		var got identity
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.AddrsFrom != "node" {
			t.Fatalf("metanode %v with %v: %q (%v), want addrs from the node at %s", args, tc.env, r.stdout, err, url)
		}
	}
	// --api and METANODE_API still win over the config.
	r := runCLI(t, map[string]string{"HOME": dir, "METANODE_API": "http://127.0.0.1:1"}, nil, "status", "--config", conf)
	r.want(t, 1, "status with METANODE_API")
	if !strings.Contains(r.stderr, "127.0.0.1:1") {
		t.Fatalf("status with METANODE_API: %q", r.stderr)
	}
	if c := stop(); c != 0 {
		t.Fatalf("serve exit %d", c)
	}
}

// TestRun_TruthDBInUse: two nodes on one truth database kept outside their
// data directories: the second is told to change --truth-db, not --data
// (it has its own); on one data directory, --data.
func TestRun_TruthDBInUse(t *testing.T) {
	dir := t.TempDir()
	truth := filepath.Join(dir, "shared", "truth.db")
	env := map[string]string{"HOME": dir}
	_, _, stop := serveInProcess(t, env, "--data", filepath.Join(dir, "a"), "--truth-db", truth)
	second := func(args ...string) string {
		t.Helper()
		args = append([]string{"serve", "--http", "127.0.0.1:0", "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns", "--no-beacon", "--log-level", "error"}, args...)
		r := runCLI(t, env, nil, args...)
		r.want(t, 1, args...)
		return r.stderr
	}
	if out := second("--data", filepath.Join(dir, "b"), "--truth-db", truth); !strings.Contains(out, "another --truth-db (META_CORE_DB_PATH)") || !strings.Contains(out, truth) {
		t.Fatalf("a second node on one truth database: %q", out)
	}
	envTruth := map[string]string{"HOME": dir, "META_CORE_DB_PATH": truth}
	r := runCLI(t, envTruth, nil, "serve", "--data", filepath.Join(dir, "c"), "--http", "127.0.0.1:0", "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns", "--no-beacon", "--log-level", "error")
	r.want(t, 1, "serve with META_CORE_DB_PATH")
	if !strings.Contains(r.stderr, "--truth-db (META_CORE_DB_PATH)") {
		t.Fatalf("a second node on one truth database by META_CORE_DB_PATH: %q", r.stderr)
	}
	if out := second("--data", filepath.Join(dir, "a")); !strings.Contains(out, "another --data") || strings.Contains(out, "--truth-db") {
		t.Fatalf("a second node on one data directory: %q", out)
	}
	if c := stop(); c != 0 {
		t.Fatalf("serve exit %d", c)
	}
}

func TestRun_KeygenAndClaimSign(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "plugin.key")
	r := runCLI(t, nil, nil, "keygen", "--out", key)
	r.want(t, 0, "keygen")
	uid := strings.TrimSpace(r.stdout)
	if err := store.CheckUID(uid); err != nil {
		t.Fatalf("keygen printed %q: %v", uid, err)
	}
	if st, err := os.Stat(key); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", st, err)
	}
	r = runCLI(t, nil, nil, "keygen", "--out", key)
	r.want(t, 1, "keygen over an existing file")
	if !strings.Contains(r.stderr, "already exists") {
		t.Fatalf("keygen twice: %q", r.stderr)
	}

	const cid = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"
	for _, tc := range []struct {
		args []string
		kind store.Kind
	}{
		{[]string{"--value", "Heat", "--ts", "1700000000000"}, store.KindText},
		{[]string{"--value", "Heat", "--ts", "0"}, store.KindText}, // signed as given, not now
		{[]string{"--value", ""}, store.KindText},
		{[]string{"--retract"}, store.KindRetraction},
		{[]string{"--cipher-b64", "AAEC"}, store.KindCipher},
	} {
		args := append([]string{"claim", "sign", "--signer", key, "--cid", cid, "--key", "title"}, tc.args...)
		r := runCLI(t, nil, nil, args...)
		r.want(t, 0, args...)
		var c store.Claim
		if err := c.UnmarshalJSON([]byte(r.stdout)); err != nil {
			t.Fatalf("claim sign printed %q: %v", r.stdout, err)
		}
		if err := c.Verify(); err != nil || c.UID != uid || c.Kind != tc.kind || c.CID != cid {
			t.Fatalf("claim %+v: verify %v", c, err)
		}
		if i := slices.Index(tc.args, "--ts"); i >= 0 && strconv.FormatUint(c.TS, 10) != tc.args[i+1] {
			t.Fatalf("claim sign %v: ts %d", tc.args, c.TS)
		}
	}
	for _, bad := range [][]string{
		{"--cid", "not a cid", "--key", "title", "--value", "x"},
		{"--cid", cid, "--key", "title", "--value", "x", "--ts", "99999999999999"},
	} {
		args := append([]string{"claim", "sign", "--signer", key}, bad...)
		r := runCLI(t, nil, nil, args...)
		r.want(t, 2, args...) // a bad flag value (TestRun_ClaimErrors)
		if !strings.Contains(r.stderr, "--cid") && !strings.Contains(r.stderr, "--ts") {
			t.Fatalf("%v: %q", bad, r.stderr)
		}
	}
	r = runCLI(t, nil, nil, "claim", "sign", "--signer", filepath.Join(dir, "none.key"), "--cid", cid, "--key", "k", "--value", "v")
	r.want(t, 1, "claim sign with a missing key")
	if !strings.Contains(r.stderr, "keygen") {
		t.Fatalf("missing key: %q", r.stderr)
	}
}

func TestRun_BenchVerify(t *testing.T) {
	r := runCLI(t, nil, nil, "bench", "verify", "--claims", "32", "--duration", "50ms")
	r.want(t, 0, "bench verify")
	if !strings.Contains(r.stdout, "claims/s") || !strings.Contains(r.stdout, "claims per CPU-second") || !strings.Contains(r.stdout, "verify with key tables: ") {
		t.Fatalf("bench verify: %q", r.stdout)
	}
}

// TestVerifyResult_Contended: a run that got well under its cores' worth
// of CPU time is flagged (its claims/s is not the machine's limit).
func TestVerifyResult_Contended(t *testing.T) {
	for _, tc := range []struct {
		cores     int
		cpu, wall float64
		want      bool
	}{
		{2, 0.66, 2, true},  // the probe's run: a third of one core
		{2, 3.9, 2, false},  // both cores busy
		{2, 2.9, 2, true},   // under 3/4 of two cores
		{1, 0.95, 1, false}, // one core, busy
		{2, 0, 2, false},    // CPU time not measured: no claim either way
	} {
		r := verifyResult{Cores: tc.cores, CPUSeconds: tc.cpu, Seconds: tc.wall}
		if got := r.contended(); got != tc.want {
			t.Errorf("%d cores, %.2f CPU-s in %.2f s: contended %v, want %v", tc.cores, tc.cpu, tc.wall, got, tc.want)
		}
	}
}

func TestRun_ClientWithoutNode(t *testing.T) {
	// Port 1 on loopback: nothing listens there.
	env := map[string]string{"METANODE_API": "http://127.0.0.1:1"}
	for _, args := range [][]string{{"status"}, {"peers"}, {"trust", "ls"}, {"health"}, {"health", "--wait", "300ms"}, {"get", "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"}} {
		r := runCLI(t, env, nil, args...)
		r.want(t, 1, args...)
		if !strings.Contains(r.stderr, "no node answers at http://127.0.0.1:1") || !strings.Contains(r.stderr, "metanode serve") {
			t.Fatalf("metanode %v: %q", args, r.stderr)
		}
	}
	// Garbage on stdin is named by line; with no valid line nothing is sent.
	r := runCLI(t, env, strings.NewReader("\n{\"uid\":1}\n"), "claim", "put", "-")
	r.want(t, 1, "claim put -")
	if !strings.Contains(r.stderr, "stdin line 2") {
		t.Fatalf("claim put garbage: %q", r.stderr)
	}
}

func TestRun_BenchSwarmVerifyOnly(t *testing.T) {
	r := runCLI(t, nil, nil, "bench", "swarm", "--claims", "200", "--only", "verify", "--dir", t.TempDir())
	r.want(t, 0, "bench swarm --only verify")
	if !strings.Contains(r.stdout, "verify limit") {
		t.Fatalf("bench swarm: %q", r.stdout)
	}
}

// serveInProcess runs serve through run() with env and extra args (on
// loopback, free ports, no mDNS) until it reports its API URL. stop cancels
// its context (what the first signal does) and returns the exit status.
func serveInProcess(t *testing.T, env map[string]string, extra ...string) (url string, logs *lockedBuffer, stop func() int) {
	t.Helper()
	var out lockedBuffer
	logs = &lockedBuffer{}
	c := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: logs, getenv: envMap(env)}
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() {
		code <- c.run(ctx, append([]string{"serve", "--http", "127.0.0.1:0",
			"--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns", "--no-beacon", "--log-format", "json"}, extra...))
	}()
	stop = func() int {
		cancel()
		select {
		case c := <-code:
			code <- c
			return c
		case <-time.After(60 * time.Second):
			t.Fatal("serve did not stop within 60s of the cancel")
		}
		return -1
	}
	t.Cleanup(func() { stop() })
	deadline := time.Now().Add(60 * time.Second)
	for url == "" {
		for _, line := range strings.Split(logs.String(), "\n") {
			var m struct{ Msg, API string }
			if json.Unmarshal([]byte(line), &m) == nil && m.Msg == "serving" {
				url = m.API
			}
		}
		select {
		case c := <-code:
			code <- c // for stop, at cleanup
			t.Fatalf("serve exited %d before serving: %s", c, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not serve in 60s: %s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return url, logs, stop
}

// TestRun_ServeInProcess runs serve through run() under the race detector
// (the e2e tests run the binary, built without it): it serves, answers
// health, and a cancelled context (what the first signal does) makes it
// close the node and exit 0.
func TestRun_ServeInProcess(t *testing.T) {
	url, logs, stop := serveInProcess(t, map[string]string{"HOME": t.TempDir()}, "--data", t.TempDir())
	r := runCLI(t, map[string]string{"METANODE_API": url}, nil, "health")
	r.want(t, 0, "health")
	if c := stop(); c != 0 {
		t.Fatalf("serve after cancel: exit %d: %s", c, logs.String())
	}
	if !strings.Contains(logs.String(), `"msg":"stopped"`) {
		t.Fatalf("no clean stop logged: %s", logs.String())
	}
}

// TestRun_ServeAddressInUse: a taken API port is one plain sentence naming
// the address and the flag to change (it used to read "open api: open api:
// listen tcp …").
func TestRun_ServeAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	args := []string{"serve", "--data", t.TempDir(), "--http", ln.Addr().String(), "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns", "--no-beacon", "--log-level", "error"}
	r := runCLI(t, map[string]string{"HOME": t.TempDir()}, nil, args...)
	r.want(t, 1, args...)
	want := "metanode serve: API address " + ln.Addr().String() + " is already in use by another program: stop it, or choose another address with the http setting " +
		"(--http, METANODE_HTTP or http: in the config file; now from flag --http)\n"
	if r.stderr != want {
		t.Fatalf("stderr %q, want %q", r.stderr, want)
	}

	// The swarm's port, set in the config file: the message names the
	// setting and the line (no guess at which program holds the port).
	dir := t.TempDir()
	conf := filepath.Join(dir, "metanode.yml")
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if err := os.WriteFile(conf, []byte("mdns: false\nlisten:\n  - /ip4/"+host+"/tcp/"+port+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args = []string{"serve", "--data", dir, "--http", "127.0.0.1:0", "--log-level", "error"}
	r = runCLI(t, map[string]string{"HOME": t.TempDir()}, nil, args...)
	r.want(t, 1, args...)
	want = "metanode serve: swarm address " + ln.Addr().String() + " is already in use by another program: stop it, or choose another address with the listen setting " +
		"(--listen, METANODE_LISTEN or listen: in the config file; now from config file " + conf + " line 2)\n"
	if r.stderr != want {
		t.Fatalf("stderr %q, want %q", r.stderr, want)
	}
}

// TestDefaultSwarmPort: the default swarm port is not Kubo's 4001, for a
// home and a bootstrap node alike; a config that names 4001 keeps it; a
// bootstrap address on the old default port is dialed on the new one too
// (a paired home that ran on the defaults moved), once per peer.
func TestDefaultSwarmPort(t *testing.T) {
	for _, profile := range []string{"home", "bootstrap"} {
		cfg, _, err := LoadConfig(loadOptions{getenv: envMap(map[string]string{"HOME": t.TempDir()}), flags: map[string][]string{"profile": {profile}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range cfg.Listen {
			if !strings.Contains(a, "/"+newDefaultPort) || strings.Contains(a, "/4001") {
				t.Errorf("profile %s listens on %s by default, want port %s", profile, a, newDefaultPort)
			}
		}
	}
	kept := "/ip4/0.0.0.0/tcp/4001"
	cfg, _, err := LoadConfig(loadOptions{getenv: envMap(map[string]string{"HOME": t.TempDir()}), fileBytes: []byte("listen: [" + kept + "]\n"), configPath: "x.yml"})
	if err != nil {
		t.Fatal(err)
	}
	if nc := cfg.NodeConfig(); !slices.Equal(nc.Listen, []string{kept}) {
		t.Errorf("a config naming 4001 listens on %v", nc.Listen)
	}

	const pid = "/p2p/16Uiu2HAm7VwKCS6oRo2FPbus3uMVQPAsJvrPop9TR9zTpu9J4Uic"
	in := []string{"/ip4/1.2.3.4/tcp/4001" + pid, "/ip6/::1/udp/4001/quic-v1" + pid, "/dns4/boot.example.org/tcp/4999" + pid}
	got := alsoNewPort(in)
	want := append(slices.Clone(in), "/ip4/1.2.3.4/tcp/4821"+pid, "/ip6/::1/udp/4821/quic-v1"+pid)
	if !slices.Equal(got, want) {
		t.Errorf("alsoNewPort(%q)\n = %q\nwant %q", in, got, want)
	}
	if in[0] != "/ip4/1.2.3.4/tcp/4001"+pid || len(in) != 3 {
		t.Errorf("alsoNewPort changed its input: %q", in)
	}
}

// TestRun_ServeMakesDatabaseDirs: the upstream variables may point the
// databases into directories that do not exist yet; serve makes them, as it
// makes the data directory.
func TestRun_ServeMakesDatabaseDirs(t *testing.T) {
	dir := t.TempDir()
	truth, cache := filepath.Join(dir, "db", "truth", "core.db"), filepath.Join(dir, "cache", "c.db")
	_, logs, stop := serveInProcess(t, map[string]string{"HOME": dir, "META_CORE_DB_PATH": truth, "META_CORE_CACHE_PATH": cache},
		"--data", filepath.Join(dir, "data"))
	if c := stop(); c != 0 {
		t.Fatalf("serve: exit %d: %s", c, logs.String())
	}
	for _, p := range []string{truth, cache} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("database %s: %v", p, err)
		}
	}
	// A directory that cannot be made names the setting and its variable.
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": dir, "META_CORE_DB_PATH": filepath.Join(blocker, "truth.db")}
	args := []string{"serve", "--data", filepath.Join(dir, "data2"), "--http", "127.0.0.1:0", "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns", "--no-beacon"}
	r := runCLI(t, env, nil, args...)
	r.want(t, 1, args...)
	if !strings.Contains(r.stderr, "(environment META_CORE_DB_PATH): make its directory") {
		t.Fatalf("truth-db under a file: %q", r.stderr)
	}
}

// TestOnSignals: the first signal cancels; one within signalWindow of it is
// the same delivery (timeout(1) signals the process and its group at once);
// a later one exits 1. The clock is fed a time per signal, so the test knows
// each signal was handled before it sends the next.
func TestOnSignals(t *testing.T) {
	sigs := make(chan os.Signal, 4)
	times := make(chan time.Time)
	cancelled := make(chan struct{})
	exited := make(chan int, 1)
	var errb lockedBuffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		onSignals(sigs, func() { close(cancelled) }, &errb, func(code int) { exited <- code }, func() time.Time { return <-times })
	}()
	t0 := time.Unix(1_700_000_000, 0)
	sigs <- syscall.SIGTERM
	times <- t0
	<-cancelled
	for _, d := range []time.Duration{0, time.Millisecond, signalWindow - time.Nanosecond} {
		sigs <- syscall.SIGTERM
		select {
		case times <- t0.Add(d):
		case c := <-exited:
			t.Fatalf("exit(%d) on a signal within the window of the first", c)
		}
	}
	sigs <- os.Interrupt
	select {
	case times <- t0.Add(signalWindow):
	case c := <-exited:
		t.Fatalf("exit(%d) on a signal within the window of the first", c)
	}
	if c := <-exited; c != 1 {
		t.Fatalf("second signal: exit(%d), want 1", c)
	}
	<-done
	if !strings.Contains(errb.String(), "second signal") {
		t.Fatalf("stderr %q", errb.String())
	}
	// A closed channel ends it without cancelling.
	closed := make(chan os.Signal)
	close(closed)
	onSignals(closed, func() { t.Fatal("cancel on a closed channel") }, &errb, func(int) { t.Fatal("exit on a closed channel") }, time.Now)
}

// TestRun_HelpCommand: "metanode help CMD" prints CMD's help (exit 0); an
// unknown CMD is a usage error (exit 2), as "metanode CMD" is.
func TestRun_HelpCommand(t *testing.T) {
	r := runCLI(t, nil, nil, "help", "get")
	r.want(t, exitOK, "help", "get")
	if !strings.HasPrefix(r.stdout+r.stderr, "Usage: metanode get CID") {
		t.Fatalf("help get: stdout %q stderr %q", r.stdout, r.stderr)
	}
	r = runCLI(t, nil, nil, "help", "nosuch")
	r.want(t, exitUsage, "help", "nosuch")
	if !strings.Contains(r.stderr, `unknown command "nosuch"`) {
		t.Fatalf("help nosuch: stderr %q", r.stderr)
	}
	r = runCLI(t, nil, nil, "help")
	r.want(t, exitOK, "help")
	if !strings.Contains(r.stdout, "Commands:") {
		t.Fatalf("help: stdout %q", r.stdout)
	}
}
