package main

// configs/Dockerfile and configs/metanode.service, run for real without
// docker or systemd: each file is parsed, its image or unit paths are mapped
// into a temp root, and the real static binary runs its start command with
// its environment, user, health check and stop signal.

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metanode/metanode/api"
)

// instr is one Dockerfile instruction, continuation lines joined.
type instr struct {
	line      int
	cmd, rest string
}

func readDockerfile(t *testing.T) []instr {
	t.Helper()
	b, err := os.ReadFile("../../configs/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var out []instr
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue // docker drops comment lines, even inside a continuation
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if s, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, rest, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		out = append(out, instr{start, strings.ToUpper(cmd), strings.TrimSpace(rest)})
		cur.Reset()
	}
	return out
}

// stages splits the instructions at each FROM, keyed by the stage's name
// ("" for the last one too, the image that runs).
func stages(ins []instr) map[string][]instr {
	m := make(map[string][]instr)
	var name string
	for _, in := range ins {
		if in.cmd == "FROM" {
			f := strings.Fields(in.rest)
			name = f[0]
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				name = f[2]
			}
			m[name] = nil
			m[""] = nil
			continue
		}
		m[name] = append(m[name], in)
		m[""] = append(m[""], in)
	}
	return m
}

// shellWords splits s like sh (and systemd) do: quotes group, a backslash
// escapes; no expansion.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	in, quote := false, rune(0)
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == '"' && r == '\\' && i+1 < len(rs):
			i++
			w.WriteRune(rs[i])
		case quote != 0:
			w.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == '\\' && i+1 < len(rs):
			i++
			w.WriteRune(rs[i])
			in = true
		case r == ' ' || r == '\t' || r == '\n':
			if in {
				words, in = append(words, w.String()), false
				w.Reset()
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed %c in %q", quote, s)
	}
	if in {
		words = append(words, w.String())
	}
	return words, nil
}

// execForm parses a JSON exec form. A shell form needs /bin/sh, which a
// scratch image does not have.
func execForm(t *testing.T, in instr, rest string) []string {
	t.Helper()
	var argv []string
	if err := json.Unmarshal([]byte(rest), &argv); err != nil || len(argv) == 0 {
		t.Fatalf("Dockerfile line %d: %s %s: want the exec form [\"/bin\", \"arg\"] (a scratch image has no shell): %v", in.line, in.cmd, rest, err)
	}
	return argv
}

// image is what the Dockerfile's final stage says about running it.
type image struct {
	env         map[string]string
	user        string
	volumes     []string
	expose      []string // "9000/tcp"
	entrypoint  []string
	cmd         []string
	health      []string
	healthLimit time.Duration // HEALTHCHECK --timeout
	stop        syscall.Signal
	owner       map[string]string      // image path -> uid:gid from COPY --chown
	mode        map[string]os.FileMode // image path -> mode from the build stage's chmod
}

var signals = map[string]syscall.Signal{"SIGTERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT, "SIGQUIT": syscall.SIGQUIT, "SIGHUP": syscall.SIGHUP}

func parseSignal(t *testing.T, s string) syscall.Signal {
	t.Helper()
	if n, err := strconv.Atoi(s); err == nil {
		return syscall.Signal(n)
	}
	sig, ok := signals[strings.ToUpper(s)]
	if !ok {
		sig, ok = signals["SIG"+strings.ToUpper(s)]
	}
	if !ok {
		t.Fatalf("unknown stop signal %q", s)
	}
	return sig
}

func parseImage(t *testing.T, ins []instr) image {
	t.Helper()
	st := stages(ins)
	im := image{env: map[string]string{}, stop: syscall.SIGTERM, healthLimit: 30 * time.Second,
		owner: map[string]string{}, mode: map[string]os.FileMode{}}
	chmod := map[string]os.FileMode{} // build-stage path -> mode
	for _, stage := range st {
		for _, in := range stage {
			if in.cmd != "RUN" {
				continue
			}
			for _, m := range regexp.MustCompile(`chmod ([0-7]{3,4}) (\S+)`).FindAllStringSubmatch(in.rest, -1) {
				mode, _ := strconv.ParseUint(m[1], 8, 32)
				fm := os.FileMode(mode & 0o777)
				if mode&0o1000 != 0 {
					fm |= os.ModeSticky
				}
				chmod[m[2]] = fm
			}
		}
	}
	for _, in := range st[""] {
		switch in.cmd {
		case "ENV":
			words, err := shellWords(in.rest)
			if err != nil {
				t.Fatalf("Dockerfile line %d: %v", in.line, err)
			}
			if len(words) > 0 && !strings.Contains(words[0], "=") { // legacy ENV K V
				im.env[words[0]] = strings.Join(words[1:], " ")
				continue
			}
			for _, w := range words {
				k, v, ok := strings.Cut(w, "=")
				if !ok {
					t.Fatalf("Dockerfile line %d: ENV %q is not K=V", in.line, w)
				}
				im.env[k] = v
			}
		case "USER":
			im.user = in.rest
		case "VOLUME":
			if strings.HasPrefix(in.rest, "[") {
				im.volumes = append(im.volumes, execForm(t, in, in.rest)...)
			} else {
				im.volumes = append(im.volumes, strings.Fields(in.rest)...)
			}
		case "EXPOSE":
			for _, p := range strings.Fields(in.rest) {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				im.expose = append(im.expose, p)
			}
		case "ENTRYPOINT":
			im.entrypoint = execForm(t, in, in.rest)
		case "CMD":
			im.cmd = execForm(t, in, in.rest)
		case "HEALTHCHECK":
			m := regexp.MustCompile(`^((?:--\S+\s+)*)CMD\s+(.*)$`).FindStringSubmatch(in.rest)
			if m == nil {
				t.Fatalf("Dockerfile line %d: HEALTHCHECK %s: want [--options] CMD [...]", in.line, in.rest)
			}
			im.health = execForm(t, in, m[2])
			if d := regexp.MustCompile(`--timeout=(\S+)`).FindStringSubmatch(m[1]); d != nil {
				var err error
				if im.healthLimit, err = time.ParseDuration(d[1]); err != nil {
					t.Fatalf("Dockerfile line %d: %v", in.line, err)
				}
			}
		case "STOPSIGNAL":
			im.stop = parseSignal(t, in.rest)
		case "COPY":
			f := strings.Fields(in.rest)
			var chown string
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				if v, ok := strings.CutPrefix(f[0], "--chown="); ok {
					chown = v
				}
				f = f[1:]
			}
			if len(f) != 2 {
				continue
			}
			if chown != "" {
				im.owner[f[1]] = chown
			}
			if m, ok := chmod[f[0]]; ok {
				im.mode[f[1]] = m
			}
		}
	}
	return im
}

// rootfs is a temp directory standing for "/" of an image or host: image
// paths are mapped into it. It is 0755 so a non-root user can reach it.
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

// freePort is a free TCP port on loopback (closed again for the node).
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// effectiveConfig is what serve makes of env and the command's flags,
// computed in-process with the binary's own loader.
func effectiveConfig(t *testing.T, env map[string]string, argv []string) Config {
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
	cfg, _, err := LoadConfig(loadOptions{getenv: envMap(env), configPath: *configPath, flags: vals})
	if err != nil {
		t.Fatalf("the configuration of %q with %v: %v", argv, env, err)
	}
	return cfg
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
func TestContainer_Dockerfile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	im := parseImage(t, readDockerfile(t))
	if len(im.entrypoint) == 0 || len(im.health) == 0 || im.user == "" {
		t.Fatalf("Dockerfile: ENTRYPOINT %q, HEALTHCHECK %q, USER %q: want all three", im.entrypoint, im.health, im.user)
	}
	as := parseAccount(t, im.user)
	if as.uid == 0 {
		t.Errorf("USER %s: the image runs as root", im.user)
	}
	root := rootfs(t)
	installBinary(t, root, im.entrypoint[0])
	dirs := slices.Clone(im.volumes)
	for _, v := range im.env {
		if filepath.IsAbs(v) && !slices.Contains(dirs, v) {
			dirs = append(dirs, v)
		}
	}
	for _, d := range dirs {
		owner, mode := account{ok: as.ok}, os.FileMode(0o755)
		if o, ok := im.owner[d]; ok {
			owner = parseAccount(t, o)
		}
		if m, ok := im.mode[d]; ok {
			mode = m
		}
		mkdirOwned(t, filepath.Join(root, d), mode, owner)
	}
	env := map[string]string{}
	for k, v := range im.env {
		env[k] = rooted(root, v)
	}
	argv := append(slices.Clone(im.entrypoint), im.cmd...)

	// What the container's node would listen on, from its own loader.
	cfg := effectiveConfig(t, env, argv[1:])
	if host, _, _ := net.SplitHostPort(cfg.HTTP); host != "0.0.0.0" && host != "::" {
		t.Errorf("the API listens on %s in the container: only an unspecified address can be published with -p", cfg.HTTP)
	}
	if cfg.MDNS {
		t.Errorf("mDNS is on in the container: a container network has no LAN to find")
	}
	if got, want := slices.Sorted(slices.Values(im.expose)), portsOf(t, cfg); !slices.Equal(got, want) {
		t.Errorf("EXPOSE %v, but the node listens on %v", got, want)
	}
	if data := strings.TrimPrefix(cfg.Data, root); !slices.ContainsFunc(im.volumes, func(v string) bool { return data == v || strings.HasPrefix(data, v+"/") }) {
		t.Errorf("the data directory %s is not a VOLUME (%v): keys and databases would die with the container", cfg.Data, im.volumes)
	}
	for _, v := range im.volumes { // each volume is the data or the files root: a volume nobody reads is a wrong variable
		if p := filepath.Join(root, v); p != cfg.Data && p != cfg.Files {
			t.Errorf("VOLUME %s is neither the data directory (%s) nor the files root (%q)", v, cfg.Data, cfg.Files)
		}
	}

	// The health check must reach the API: its URL's port is the API's,
	// on loopback inside the container.
	_, apiPort, _ := net.SplitHostPort(cfg.HTTP)
	hcURL := cmpOr(im.env["METANODE_API"], defaultAPI)
	for _, a := range im.health {
		if strings.HasPrefix(a, "http://") {
			hcURL = a
		}
	}
	if want := "http://127.0.0.1:" + apiPort; hcURL != want {
		t.Fatalf("HEALTHCHECK asks %s, the API is at %s", hcURL, want)
	}

	// Our tests listen on loopback only: override just the API address (to
	// a free port) and the swarm's (to loopback, any port, same transports),
	// and point the health check's URL (METANODE_API) at that port.
	port := freePort(t)
	httpVar := ""
	for k := range im.env {
		if slices.Contains(settingNamed("http").env, k) {
			httpVar = k
		}
	}
	if httpVar != "METANODE_HTTP" {
		t.Fatalf("the Dockerfile sets the API address with %q, want METANODE_HTTP (host:port)", httpVar)
	}
	env["METANODE_HTTP"] = "127.0.0.1:" + port
	listen := loopbackListen(t, cfg.Listen)
	env["METANODE_LISTEN"] = strings.Join(listen, ",")
	apiURL := "http://127.0.0.1:" + port
	health := []string{filepath.Join(root, im.health[0])}
	for _, a := range im.health[1:] {
		health = append(health, strings.Replace(rooted(root, a), hcURL, apiURL, 1))
	}
	if !slices.Contains(im.health, hcURL) {
		env["METANODE_API"] = apiURL // the clients' address follows the API's
	}
	argv[0] = filepath.Join(root, argv[0])
	for i := 1; i < len(argv); i++ {
		argv[i] = rooted(root, argv[i])
	}
	if !as.ok {
		t.Log("not root: the node runs as this user, not as the image's USER")
	}

	srv := startProc(t, argv, env, as, root) // docker's default WORKDIR is /
	healthy, answer := false, ""
	for i := 0; i < 240 && !healthy; i++ { // at most ~60 s
		select {
		case err := <-srv.done:
			srv.done <- err
			t.Fatalf("the node exited before it was healthy: %v", err)
		default:
		}
		code, out := runOnce(t, health, env, as, root, im.healthLimit)
		if code == exitUsage {
			t.Fatalf("HEALTHCHECK %q: a usage error: %s", health, out)
		}
		healthy, answer = code == 0 && strings.Contains(out, `"ok"`), out
		if !healthy {
			time.Sleep(250 * time.Millisecond)
		}
	}
	if !healthy {
		t.Fatal("HEALTHCHECK never succeeded")
	}
	var h api.Health
	if err := json.Unmarshal([]byte(answer), &h); err != nil {
		t.Fatalf("HEALTHCHECK printed %q: %v", answer, err)
	}
	if cfg.Files != "" && h.Checks["watcher"] != "ok" { // the files volume is watched
		t.Errorf("files %s: the watcher is %q, want ok", cfg.Files, h.Checks["watcher"])
	}
	if !strings.Contains(srv.logs.String(), "api="+apiURL) {
		t.Errorf("the node does not report its API at %s", apiURL)
	}
	checkSwarmListens(t, health[0], apiURL, env, as, root, listen)
	if as.ok {
		st, err := os.Stat(filepath.Join(cfg.Data, "node.key"))
		if err != nil {
			t.Fatalf("no node key in the data volume: %v", err)
		}
		if sys := st.Sys().(*syscall.Stat_t); sys.Uid != as.uid {
			t.Errorf("node.key owned by uid %d, want the USER %d", sys.Uid, as.uid)
		}
	}
	stopProc(t, srv, im.stop, 60*time.Second)
}

// unit is a systemd unit file: section -> key -> values in order.
type unit map[string]map[string][]string

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unit{}
	section, cont := "", ""
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if cont == "" && (line == "" || line[0] == '#' || line[0] == ';') {
			continue
		}
		if s, ok := strings.CutSuffix(line, `\`); ok {
			cont += s + " "
			continue
		}
		line, cont = cont+line, ""
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			t.Fatalf("%s line %d: %q is not Key=Value in a section", path, n+1, line)
		}
		u[section][strings.TrimSpace(k)] = append(u[section][strings.TrimSpace(k)], strings.TrimSpace(v))
	}
	return u
}

// last is the value in effect (the last assignment wins).
func (u unit) last(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// execLine splits an Exec*= line; only the "-" prefix (ignore failure) is
// understood, and no %-specifiers.
func execLine(t *testing.T, v string) []string {
	t.Helper()
	if strings.Contains(v, "%") {
		t.Fatalf("Exec line %q: %%-specifiers are not mapped by this test", v)
	}
	argv, err := shellWords(v)
	if err != nil || len(argv) == 0 || !filepath.IsAbs(strings.TrimPrefix(argv[0], "-")) {
		t.Fatalf("Exec line %q: want an absolute command (%v)", v, err)
	}
	argv[0] = strings.TrimPrefix(argv[0], "-")
	return argv
}

// TestContainer_SystemdUnit runs the unit's ExecStart with its Environment=,
// User= and state directory, then its ExecStartPost (the readiness check),
// then stops it with KillSignal; systemd-analyze verify checks the file.
func TestContainer_SystemdUnit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const path = "../../configs/metanode.service"
	u := readUnit(t, path)
	svc := u["Service"]
	if len(svc["ExecStart"]) != 1 {
		t.Fatalf("ExecStart: %q, want one", svc["ExecStart"])
	}
	start := execLine(t, svc["ExecStart"][0])
	unitBin := start[0]
	root := rootfs(t)
	installBinary(t, root, start[0])

	// The unit's user: a real account when one exists, else a stand-in
	// unprivileged uid (the test does not add users to this machine).
	as := account{uid: 65532, gid: 65532, ok: os.Geteuid() == 0}
	name := u.last("Service", "User")
	if name == "" || name == "root" {
		t.Errorf("User=%q: the service runs as root", name)
	}
	if usr, err := user.Lookup(name); err == nil {
		uid, _ := strconv.ParseUint(usr.Uid, 10, 32)
		gid, _ := strconv.ParseUint(usr.Gid, 10, 32)
		as.uid, as.gid = uint32(uid), uint32(gid)
	} else if as.ok {
		t.Logf("no user %q here: uid:gid %d:%d stands in for it", name, as.uid, as.gid)
	}

	// systemd's environment for a User= service (no login: HOME is the
	// account's home, useradd --home-dir in the unit's comment), then the
	// unit's Environment= lines.
	writable := []string{"/tmp"} // PrivateTmp=yes
	state := ""
	if sd := u.last("Service", "StateDirectory"); sd != "" {
		state = "/var/lib/" + sd
		mode := uint64(0o755)
		if m := u.last("Service", "StateDirectoryMode"); m != "" {
			mode, _ = strconv.ParseUint(m, 8, 32)
		}
		mkdirOwned(t, filepath.Join(root, state), os.FileMode(mode), as)
		writable = append(writable, state)
	}
	for _, v := range svc["ReadWritePaths"] {
		writable = append(writable, strings.Fields(v)...)
	}
	mkdirOwned(t, filepath.Join(root, "tmp"), 0o777|os.ModeSticky, account{})
	env := map[string]string{"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin", "USER": name, "LOGNAME": name,
		"HOME": rooted(root, cmpOr(state, "/")), "SHELL": "/usr/sbin/nologin"}
	if state != "" {
		env["STATE_DIRECTORY"] = filepath.Join(root, state)
	}
	for _, v := range svc["Environment"] {
		words, err := shellWords(v)
		if err != nil {
			t.Fatalf("Environment=%s: %v", v, err)
		}
		for _, w := range words {
			k, val, ok := strings.Cut(w, "=")
			if !ok {
				t.Fatalf("Environment=%s: %q is not K=V", v, w)
			}
			env[k] = rooted(root, val)
		}
	}
	if len(svc["EnvironmentFile"]) > 0 {
		t.Fatalf("EnvironmentFile= is not mapped by this test")
	}
	for i := 1; i < len(start); i++ {
		start[i] = rooted(root, start[i])
	}

	// What the service's node would do, from its own loader: with
	// ProtectSystem=strict it writes only under the state directory,
	// ReadWritePaths and the private /tmp; the API has no authentication, so
	// it stays on loopback; the readiness check asks where the API is.
	cfg := effectiveConfig(t, env, start[1:])
	for _, p := range slices.Compact([]string{cfg.Data, cmpOr(cfg.TruthDB, cfg.Data), cmpOr(cfg.CacheDB, cfg.Data)}) {
		p = "/" + strings.TrimPrefix(strings.TrimPrefix(p, root), "/")
		if !slices.ContainsFunc(writable, func(w string) bool { return p == w || strings.HasPrefix(p, w+"/") }) {
			t.Errorf("the node writes %s, read-only under ProtectSystem=strict (writable: %v)", p, writable)
		}
	}
	if host, _, _ := net.SplitHostPort(cfg.HTTP); net.ParseIP(host) == nil || !net.ParseIP(host).IsLoopback() {
		t.Errorf("the service's API listens on %s: keep it on loopback", cfg.HTTP)
	}
	if asks := cmpOr(env["METANODE_API"], defaultAPI); asks != "http://"+cfg.HTTP {
		t.Errorf("ExecStartPost asks %s, the API is at %s", asks, cfg.HTTP)
	}

	// Our tests listen on loopback only and send no multicast: override
	// the API address (and the client's METANODE_API with it, as the unit's
	// comment says to), the swarm's addresses and mDNS.
	port := freePort(t)
	apiURL := "http://127.0.0.1:" + port
	env["METANODE_HTTP"], env["METANODE_API"] = "127.0.0.1:"+port, apiURL
	listen := loopbackListen(t, cfg.Listen)
	env["METANODE_LISTEN"], env["METANODE_MDNS"] = strings.Join(listen, ","), "false"
	dir := rooted(root, cmpOr(u.last("Service", "WorkingDirectory"), "/"))
	start[0] = filepath.Join(root, start[0])

	srv := startProc(t, start, env, as, dir)
	running, done := whileRunning(srv)
	defer done()
	for _, v := range svc["ExecStartPost"] {
		post := execLine(t, v)
		post[0] = rooted(root, post[0])
		if code, out := runWithin(t, running, post, env, as, dir, 90*time.Second); code != 0 { // TimeoutStartSec's default
			t.Fatalf("ExecStartPost=%s: exit %d: %s", v, code, out)
		}
	}
	checkSwarmListens(t, start[0], apiURL, env, as, dir, listen)
	sig := syscall.SIGTERM
	if s := u.last("Service", "KillSignal"); s != "" {
		sig = parseSignal(t, s)
	}
	limit := 90 * time.Second
	if s := u.last("Service", "TimeoutStopSec"); s != "" {
		if _, err := strconv.Atoi(s); err == nil {
			s += "s"
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("TimeoutStopSec=%s: %v", s, err)
		}
		limit = d
	}
	if limit <= 2*api.DefaultShutdownTimeout {
		t.Errorf("TimeoutStopSec=%v: the API's close alone may take %v (drain, then cut handlers)", limit, 2*api.DefaultShutdownTimeout)
	}
	stopProc(t, srv, sig, limit)

	// systemd's own check of the file, with the commands pointing at the
	// installed binary (verify wants them to exist).
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("no systemd-analyze: the unit file is not verified by systemd")
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "metanode.service")
	if err := os.WriteFile(copyPath, bytes.ReplaceAll(b, []byte(unitBin), []byte(start[0])), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := runOnce(t, []string{sa, "verify", copyPath}, map[string]string{"PATH": os.Getenv("PATH")}, account{}, "/", 60*time.Second)
	if code != 0 || strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify: exit %d:\n%s", code, out)
	}
}

// TestContainer_StaticBinary: the binary these tests run is built as the
// Dockerfile builds it where it matters on a scratch image (CGO off: no
// loader, no libc), and its version stamp is the variable the build line's
// -X main.version sets (TestE2E_VersionStamped).
func TestContainer_StaticBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(info.Settings, func(s debug.BuildSetting) bool { return s.Key == "CGO_ENABLED" }); i < 0 || info.Settings[i].Value != "0" {
		t.Errorf("the test binary is not built with CGO_ENABLED=0: %v", info.Settings)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the test binary is dynamically linked (%v): it would not run on a scratch image", p.Type)
		}
	}
}
