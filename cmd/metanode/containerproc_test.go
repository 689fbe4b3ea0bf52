//go:build linux

package main

// What the container and unit tests share: a temp root standing in for
// the image or the host, accounts, and starting, probing and stopping the
// real binary.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// instr is one Dockerfile instruction, continuation lines joined.
func rootfs(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "metanode-rootfs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// installBinary copies the test's static binary to root+path, 0755 (the
// build helper's own directory is private to root).
func installBinary(t *testing.T, root, path string) {
	t.Helper()
	b, err := os.ReadFile(buildBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(root, path)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// rooted maps an absolute path into root; other values stay as they are.
func rooted(root, v string) string {
	if filepath.IsAbs(v) {
		return filepath.Join(root, v)
	}
	return v
}

// account is the uid:gid a process runs as; ok is false when the test is
// not root and runs everything as itself.
type account struct {
	uid, gid uint32
	ok       bool
}

func (a account) attr() *syscall.SysProcAttr {
	if !a.ok {
		return nil
	}
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: a.uid, Gid: a.gid}}
}

// mkdirOwned makes dir with mode, owned by a when the test is root.
func mkdirOwned(t *testing.T, dir string, mode os.FileMode, a account) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	if a.ok {
		if err := os.Chown(dir, int(a.uid), int(a.gid)); err != nil {
			t.Fatal(err)
		}
	}
}

func parseAccount(t *testing.T, s string) account {
	t.Helper()
	u, g, _ := strings.Cut(s, ":")
	uid, err1 := strconv.ParseUint(u, 10, 32)
	gid, err2 := strconv.ParseUint(cmpOr(g, u), 10, 32)
	if err1 != nil || err2 != nil {
		t.Fatalf("user %q: want numeric uid:gid (a scratch image has no /etc/passwd)", s)
	}
	return account{uint32(uid), uint32(gid), os.Geteuid() == 0}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// cmpOrSlice is a unless it is empty, else b.
func cmpOrSlice(a, b []string) []string {
	if len(a) > 0 {
		return a
	}
	return b
}

// effectiveConfig is what serve makes of env and the command's flags,
// computed in-process with the binary's own loader.
func effectiveConfig(t *testing.T, env map[string]string, argv []string) (Config, configLayers) {
	t.Helper()
	if len(argv) == 0 || argv[0] != "serve" {
		t.Fatalf("the start command is %q, want serve", argv)
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	vals, configPath := configFlags(fs)
	if err := fs.Parse(argv[1:]); err != nil || fs.NArg() > 0 {
		t.Fatalf("serve %q: %v %q", argv[1:], err, fs.Args())
	}
	for _, name := range []string{"http", "listen", "mdns"} {
		if _, ok := vals[name]; ok {
			t.Fatalf("serve %q sets --%s: this test overrides it through the environment, which a flag would beat", argv, name)
		}
	}
	cfg, layers, err := LoadConfig(loadOptions{getenv: envMap(env), configPath: *configPath, flags: vals})
	if err != nil {
		t.Fatalf("the configuration of %q with %v: %v", argv, env, err)
	}
	return cfg, layers
}

// loopbackListen rewrites listen multiaddrs onto loopback with port 0 (our
// tests never listen beyond loopback), keeping each one's transport.
func loopbackListen(t *testing.T, listen []string) []string {
	t.Helper()
	var out []string
	for _, a := range listen {
		parts := strings.Split(a, "/")
		for i := 1; i+1 < len(parts); i++ {
			switch parts[i] {
			case "ip4":
				parts[i+1] = "127.0.0.1"
			case "ip6":
				parts[i+1] = "::1"
			case "tcp", "udp":
				parts[i+1] = "0"
			case "dns", "dns4", "dns6":
				t.Fatalf("listen %q: a name, not an address", a)
			}
		}
		out = append(out, strings.Join(parts, "/"))
	}
	return out
}

// portsOf are the "port/proto" a configuration listens on: the API and
// each swarm address.
func portsOf(t *testing.T, cfg Config) []string {
	t.Helper()
	_, port, err := net.SplitHostPort(cfg.HTTP)
	if err != nil {
		t.Fatal(err)
	}
	ports := []string{port + "/tcp"}
	re := regexp.MustCompile(`/(tcp|udp)/(\d+)`)
	for _, a := range cfg.Listen {
		m := re.FindStringSubmatch(a)
		if m == nil {
			t.Fatalf("listen %q: no tcp or udp port", a)
		}
		ports = append(ports, m[2]+"/"+m[1])
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

func environ(env map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// startProc starts argv with exactly env, as a, in dir; its output goes to
// a server's log buffer so the e2e helpers apply.
func startProc(t *testing.T, argv []string, env map[string]string, a account, dir string) *server {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir, cmd.SysProcAttr = environ(env), dir, a.attr()
	s := &server{cmd: cmd, logs: &lockedBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %q: %v", argv, err)
	}
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case err := <-s.done:
			s.done <- err
		default:
			cmd.Process.Kill()
			<-s.done
		}
		if t.Failed() {
			t.Logf("%q logs:\n%s", argv, s.logs.String())
		}
	})
	return s
}

// runOnce runs argv to its end (bounded by limit) and returns its exit
// status and output.
func runOnce(t *testing.T, argv []string, env map[string]string, a account, dir string, limit time.Duration) (int, string) {
	t.Helper()
	return runWithin(t, context.Background(), argv, env, a, dir, limit)
}

// runWithin is runOnce ended early when parent ends.
func runWithin(t *testing.T, parent context.Context, argv []string, env map[string]string, a account, dir string, limit time.Duration) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(parent, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env, cmd.Dir, cmd.SysProcAttr = environ(env), dir, a.attr()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String()
	}
	t.Fatalf("run %q: %v", argv, err)
	return 0, ""
}

// whileRunning is a context that ends when s exits (a readiness check
// then stops waiting for a node that is gone, as systemd would).
func whileRunning(s *server) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case err := <-s.done:
			s.done <- err
			cancel()
		case <-stop:
		}
	}()
	return ctx, func() { close(stop); <-finished; cancel() }
}

// checkSwarmListens asks the running node (as a, with env) for its swarm
// addresses and wants one on each of listen (port 0 = any port).
func checkSwarmListens(t *testing.T, bin string, api string, env map[string]string, a account, dir string, listen []string) {
	t.Helper()
	code, out := runOnce(t, []string{bin, "status", "--api", api}, env, a, dir, 30*time.Second)
	var st struct{ Addrs []string }
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("metanode status: exit %d: %s", code, out)
	}
	port := regexp.MustCompile(`/(tcp|udp)/\d+`)
	for _, want := range listen {
		found := false
		for _, got := range st.Addrs {
			got, _, _ = strings.Cut(got, "/p2p/")
			found = found || port.ReplaceAllString(got, "/$1/0") == want
		}
		if !found {
			t.Errorf("the node listens on %v: none is %s", st.Addrs, want)
		}
	}
}

// stopProc sends sig and wants exit 0 within limit, with the node's
// "stopped" log line (its graceful shutdown ran to the end).
func stopProc(t *testing.T, s *server, sig syscall.Signal, limit time.Duration) {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		s.done <- err
		if err != nil {
			t.Fatalf("after %v: %v, want exit 0", sig, err)
		}
	case <-time.After(limit):
		t.Fatalf("no exit within %v of %v", limit, sig)
	}
	if !regexp.MustCompile(`(?m)msg=stopped|"msg":"stopped"`).MatchString(s.logs.String()) {
		t.Errorf("no clean shutdown logged after %v", sig)
	}
}

// TestContainer_Dockerfile runs the image's command as docker would: its
// ENV (and nothing else: no HOME but the Dockerfile's), its USER, its
// volumes as temp dirs, ENTRYPOINT+CMD, HEALTHCHECK CMD until ok, then
// STOPSIGNAL and a clean exit.
