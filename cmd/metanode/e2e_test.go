package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/store"
)

// server is a `metanode serve` process.
type server struct {
	cmd  *exec.Cmd
	url  string
	data string
	logs *lockedBuffer
	done chan error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startServe starts the binary's serve on loopback only (free ports, no
// mDNS, JSON logs) and waits until it reports the API's URL.
func startServe(t *testing.T, data string, extra ...string) *server {
	t.Helper()
	return startNodeCmd(t, data, []string{"serve"}, extra...)
}

// startNodeCmd starts a serving command (serve, or join CODE) like startServe.
func startNodeCmd(t *testing.T, data string, command []string, extra ...string) *server {
	t.Helper()
	args := append(append(command, "--data", data, "--http", "127.0.0.1:0",
		"--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns", "--no-beacon", "--log-format", "json"), extra...)
	return startArgs(t, data, args, "HOME="+t.TempDir())
}

// startArgs starts the binary with exactly args (and env added to this
// process's environment) and waits until it logs "serving" with its API's
// URL, which needs JSON logs (--log-format json, flag or config).
func startArgs(t *testing.T, data string, args []string, env ...string) *server {
	t.Helper()
	cmd := exec.Command(buildBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	s := &server{cmd: cmd, data: data, logs: &lockedBuffer{}, done: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urlc := make(chan string, 1)
	var copier sync.WaitGroup
	copier.Go(func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(s.logs, line)
			var m struct{ Msg, API string }
			if json.Unmarshal([]byte(line), &m) == nil && m.Msg == "serving" && m.API != "" {
				select {
				case urlc <- m.API:
				default:
				}
			}
		}
		io.Copy(io.Discard, pr)
	})
	go func() {
		err := cmd.Wait()
		pw.Close()
		copier.Wait()
		s.done <- err
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-s.done
		}
		if t.Failed() {
			t.Logf("serve %s logs:\n%s", data, s.logs.String())
		}
	})
	select {
	case s.url = <-urlc:
	case err := <-s.done:
		s.done <- err
		t.Fatalf("serve exited before serving: %v\n%s", err, s.logs.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("serve did not report its API URL in 90s\n%s", s.logs.String())
	}
	return s
}

// stop sends SIGTERM and wants a clean exit 0.
func (s *server) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		s.done <- err
		if err != nil {
			t.Fatalf("serve after SIGTERM: %v, want exit 0\n%s", err, s.logs.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not stop within 60s of SIGTERM\n%s", s.logs.String())
	}
}

// cli runs the binary with args and returns its output; it fails the test
// unless the exit status is want.
func binCLI(t *testing.T, stdin io.Reader, want int, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, buildBinary(t), args...)
	cmd.Stdin = stdin
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("metanode %s: %v", strings.Join(args, " "), err)
	}
	if code != want {
		t.Fatalf("metanode %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, out.String(), errb.String())
	}
	return out.String()
}

// TestE2E_ClaimsOverCLIAndHTTP is a consumer's view of the real binary:
// keys and claims made with the CLI, read back over HTTP, followed over
// SSE, and a graceful SIGTERM.
func TestE2E_ClaimsOverCLIAndHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	srv := startServe(t, filepath.Join(dir, "data"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := api.NewClient(srv.url)
	defer cl.Close()

	binCLI(t, nil, 0, "health", "--api", srv.url, "--wait", "30s")

	key := filepath.Join(dir, "plugin.key")
	uid := strings.TrimSpace(binCLI(t, nil, 0, "keygen", "--out", key))
	const cid = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"

	// Follow the meta stream from a snapshot before writing.
	events := make(chan store.Event, 64)
	evctx, evcancel := context.WithCancel(ctx)
	var follower sync.WaitGroup
	follower.Go(func() {
		_ = cl.Events(evctx, "meta", "0-0", func(e store.Event) error {
			select {
			case events <- e:
			case <-evctx.Done():
			}
			return nil
		})
	})
	defer func() { evcancel(); follower.Wait() }()

	// One claim from flags.
	out := binCLI(t, nil, 0, "claim", "put", "--api", srv.url, "--signer", key, "--cid", cid, "--key", "title", "--value", "Heat")
	var r api.ClaimResult
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Status != "accepted" {
		t.Fatalf("claim put printed %q (%v), want one accepted result", out, err)
	}
	// Claims signed with claim sign, piped to claim put -.
	var lines bytes.Buffer
	for _, kv := range [][2]string{{"year", "1995"}, {"genres/crime", "true"}} {
		lines.WriteString(binCLI(t, nil, 0, "claim", "sign", "--signer", key, "--cid", cid, "--key", kv[0], "--value", kv[1]))
	}
	out = binCLI(t, &lines, 0, "claim", "put", "--api", srv.url, "-")
	if n := strings.Count(out, `"status":"accepted"`); n != 2 {
		t.Fatalf("claim put - printed %q: want 2 accepted", out)
	}
	// A claim the node refuses (a signer the owner distrusted): exit 1, and
	// the result says why.
	key2 := filepath.Join(dir, "other.key")
	uid2 := strings.TrimSpace(binCLI(t, nil, 0, "keygen", "--out", key2))
	binCLI(t, nil, 0, "trust", "rm", uid2, "--api", srv.url)
	out = binCLI(t, nil, 1, "claim", "put", "--api", srv.url, "--signer", key2, "--cid", cid, "--key", "title", "--value", "Spam")
	if !strings.Contains(out, "untrusted_signer") {
		t.Fatalf("claim put by a distrusted signer printed %q", out)
	}

	// Read back: CLI and HTTP agree.
	var got api.MetaResponse
	if err := json.Unmarshal([]byte(binCLI(t, nil, 0, "get", cid, "--api", srv.url)), &got); err != nil {
		t.Fatal(err)
	}
	meta, err := cl.Meta(ctx, cid, api.MetaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"title": "Heat", "year": "1995", "genres/crime": "true"} {
		if got.Metadata[k] != v || meta.Metadata[k] != v {
			t.Errorf("%s: CLI %q, HTTP %q, want %q", k, got.Metadata[k], meta.Metadata[k], v)
		}
	}
	if got.RID == "" || got.RID != meta.RID {
		t.Fatalf("rid: CLI %q, HTTP %q", got.RID, meta.RID)
	}
	binCLI(t, nil, 1, "get", "bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "--api", srv.url)

	// The stream saw every field set, for this record.
	want := map[string]bool{"file:" + meta.RID + "/title": false, "file:" + meta.RID + "/year": false, "file:" + meta.RID + "/genres/crime": false}
	deadline := time.After(30 * time.Second)
	for seen := 0; seen < len(want); {
		select {
		case e := <-events:
			var d struct{ Type, Key string }
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatalf("event data %s: %v", e.Data, err)
			}
			if done, ok := want[d.Key]; ok && !done && d.Type == "set" {
				want[d.Key] = true
				seen++
			}
		case <-deadline:
			t.Fatalf("SSE: after 30s, seen %v", want)
		}
	}
	// A change arrives live.
	binCLI(t, nil, 0, "claim", "put", "--api", srv.url, "--signer", key, "--cid", cid, "--key", "title", "--value", "Heat (1995)")
	deadline = time.After(30 * time.Second)
	for live := false; !live; {
		select {
		case e := <-events:
			live = strings.Contains(string(e.Data), `"file:`+meta.RID+`/title"`) && e.ID != ""
		case <-deadline:
			t.Fatal("SSE: no live event for the new title within 30s")
		}
	}

	// Swarm and trust commands answer JSON; the plugin was auto-trusted.
	var st api.SwarmStatus
	if err := json.Unmarshal([]byte(binCLI(t, nil, 0, "status", "--api", srv.url)), &st); err != nil || st.PeerID == "" {
		t.Fatalf("status: %+v, %v", st, err)
	}
	binCLI(t, nil, 0, "peers", "--api", srv.url)
	if tl := binCLI(t, nil, 0, "trust", "ls", "--api", srv.url); !strings.Contains(tl, uid) {
		t.Fatalf("trust ls lacks the plugin %s: %s", uid, tl)
	}
	// id (offline) names the same node as the running one.
	if id := strings.TrimSpace(binCLI(t, nil, 0, "id", "--data", srv.data, "--field", "peerId")); id != st.PeerID {
		t.Fatalf("id --field peerId = %s, node says %s", id, st.PeerID)
	}

	evcancel()
	follower.Wait()
	srv.stop(t)
	if !strings.Contains(srv.logs.String(), `"msg":"stopped"`) {
		t.Fatalf("no clean stop in the logs:\n%s", srv.logs.String())
	}
}

// TestE2E_PairingSteps runs the README's pairing steps with two real nodes
// on one machine: A makes a code, B joins with it (no other step), then a
// plugin's claim written on either home is read on the other.
func TestE2E_PairingSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "home-a"), filepath.Join(dir, "home-b")
	srvA := startServe(t, a)
	key := filepath.Join(dir, "plugin-a.key")
	binCLI(t, nil, 0, "keygen", "--out", key)
	const cidA = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"
	binCLI(t, nil, 0, "claim", "put", "--api", srvA.url, "--signer", key, "--cid", cidA, "--key", "title", "--value", "Heat")

	code := strings.TrimSpace(binCLI(t, nil, 0, "invite", "--api", srvA.url))
	if !strings.HasPrefix(code, "mn1:") || strings.Contains(code, "\n") {
		t.Fatalf("invite printed %q, want one mn1: code", code)
	}
	// B's API on a port of its own, so the restart below can be checked
	// to come back on it.
	portB := freePort(t)
	srvB := startNodeCmd(t, b, []string{"join", code}, "--http", "127.0.0.1:"+portB)
	waitLog(t, srvB, "joining: done")
	if strings.Contains(srvB.logs.String(), "config file read") {
		t.Fatalf("join on a fresh data directory logged a config file read:\n%s", srvB.logs.String())
	}
	waitTitle(t, srvB.url, cidA, "Heat")
	// The join showed its progress: connecting, then n of m claims up to m.
	logs := srvB.logs.String()
	progress := regexp.MustCompile(`joining: syncing (\d+) of (\d+) claims`).FindAllStringSubmatch(logs, -1)
	clA := api.NewClient(srvA.url)
	defer clA.Close()
	stA, err := clA.SwarmStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs, "joining: connecting to "+stA.UID) ||
		len(progress) == 0 || progress[len(progress)-1][1] != progress[len(progress)-1][2] || progress[0][2] == "0" {
		t.Fatalf("join progress lines: %q\n%s", progress, logs)
	}

	// The other way: B's plugin writes, A reads (A trusted B's node uid
	// when B presented the code, and B vouches for its plugin).
	keyB := filepath.Join(dir, "plugin-b.key")
	binCLI(t, nil, 0, "keygen", "--out", keyB)
	const cidB = "bafkreidon73zkcrwdb5iafqtijxildoonbwnpv7dyd6ef3qdgads2jc4su"
	binCLI(t, nil, 0, "claim", "put", "--api", srvB.url, "--signer", keyB, "--cid", cidB, "--key", "title", "--value", "Ronin")
	waitTitle(t, srvA.url, cidB, "Ronin")

	// A code pairs one home only: a third home is refused with a clear message.
	c := filepath.Join(dir, "home-c")
	out := binCLIAllowing(t, "join", code, "--data", c, "--http", "127.0.0.1:0", "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns", "--no-beacon")
	if !strings.Contains(out, "pairing refused") || !strings.Contains(out, "new code") || !strings.Contains(out, "inviter "+stA.UID) {
		t.Fatalf("a second join with one code: %s", out)
	}

	// B restarts with exactly the command join printed, from another
	// HOME (so a default data directory would be another node): the
	// config join wrote keeps the pairing, the API's address and the
	// other flags join was given.
	hint := regexp.MustCompile(`next time: (metanode [^)]*)\)`).FindStringSubmatch(srvB.logs.String())
	if hint == nil {
		t.Fatalf("join printed no restart command:\n%s", srvB.logs.String())
	}
	clB := api.NewClient(srvB.url)
	defer clB.Close()
	stB, err := clB.SwarmStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	srvB.stop(t)
	// What join was given is in its config (listen and mdns checked here:
	// the restart keeps them on loopback by environment whatever the file
	// says, as every test network must be).
	written, _, err := LoadConfig(loadOptions{getenv: envMap(nil), configPath: filepath.Join(b, "metanode.yml")})
	if err != nil || written.HTTP != "127.0.0.1:"+portB || written.MDNS ||
		!slices.Equal(written.Listen, []string{"/ip4/127.0.0.1/tcp/0"}) || written.LogFormat != "json" {
		t.Fatalf("the config join wrote (%v):\n%s", err, written)
	}
	srvB = startArgs(t, b, strings.Fields(hint[1])[1:], "HOME="+t.TempDir(),
		"METANODE_LISTEN=/ip4/127.0.0.1/tcp/0", "METANODE_MDNS=false", "METANODE_BEACON=false")
	if want := "http://127.0.0.1:" + portB; srvB.url != want {
		t.Fatalf("%q serves at %s, want %s as join did", hint[1], srvB.url, want)
	}
	// A client command finds B from B's config (no --api).
	var st struct{ UID string }
	if err := json.Unmarshal([]byte(binCLI(t, nil, 0, "status", "--data", b)), &st); err != nil || st.UID != stB.UID {
		t.Fatalf("status --data %s: uid %q (%v), want %s", b, st.UID, err, stB.UID)
	}
	binCLI(t, nil, 0, "claim", "put", "--api", srvA.url, "--signer", key, "--cid", cidB, "--key", "year", "--value", "1998")
	waitField(t, srvB.url, cidB, "year", "1998")
	srvB.stop(t)
	srvA.stop(t)
}

// waitLog waits (bounded) until s has logged a line containing want.
func waitLog(t *testing.T, s *server, want string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(s.logs.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the logs within 90s:\n%s", want, s.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitTitle(t *testing.T, base, cid, title string) {
	t.Helper()
	waitField(t, base, cid, "title", title)
}

// waitField polls the node at base (bounded) until cid's merged key is want.
func waitField(t *testing.T, base, cid, key, want string) {
	t.Helper()
	cl := api.NewClient(base)
	defer cl.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		m, err := cl.Meta(context.Background(), cid, api.MetaOptions{})
		if err == nil && m.Metadata[key] == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never had %s=%q for %s: %+v, %v", base, key, want, cid, m, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// binCLIAllowing runs the binary and returns stdout and stderr together,
// whatever the exit status; it fails the test only when the command
// succeeds.
func binCLIAllowing(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, buildBinary(t), args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("metanode %s succeeded, want a failure:\n%s", strings.Join(args, " "), out)
	}
	return string(out)
}

// TestE2E_StartupErrors: a bad setting, a taken port or a data directory in
// use exits 1 with one line that says what to do.
func TestE2E_StartupErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(conf, []byte("http: 127.0.0.1:0\nswarm-nme: typo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(buildBinary(t), "serve", "--config", conf, "--data", filepath.Join(dir, "d"))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "swarm-nme") || strings.Count(strings.TrimSpace(string(out)), "\n") > 0 {
		t.Fatalf("serve with an unknown key: %v\n%s", err, out)
	}

	srv := startServe(t, filepath.Join(dir, "a"))
	addr := strings.TrimPrefix(srv.url, "http://")
	cmd = exec.Command(buildBinary(t), "serve", "--data", filepath.Join(dir, "b"), "--http", addr,
		"--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns", "--no-beacon", "--log-level", "error")
	cmd.Env = append(os.Environ(), "HOME="+dir)
	out, err = cmd.CombinedOutput()
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "already in use by another program") {
		t.Fatalf("serve on a taken port: %v\n%s", err, out)
	}
	cmd = exec.Command(buildBinary(t), "serve", "--data", filepath.Join(dir, "a"), "--http", "127.0.0.1:0",
		"--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns", "--no-beacon", "--log-level", "error")
	cmd.Env = append(os.Environ(), "HOME="+dir)
	out, err = cmd.CombinedOutput()
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "stop that node first") {
		t.Fatalf("serve on a running node's data directory: %v\n%s", err, out)
	}
	srv.stop(t)
}

// freePort is a free TCP port on loopback (closed again for the node).
func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}
