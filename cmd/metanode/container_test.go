//go:build linux

package main

// configs/Dockerfile and configs/metanode.service, run for real without
// docker or systemd: each file is parsed, its image or unit paths are mapped
// into a temp root, and the real static binary runs its start command with
// its environment, user, health check and stop signal.

import (
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
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
			for len(f) > 1 && strings.HasPrefix(f[0], "--") { // --platform=…
				f = f[1:]
			}
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

// dockerRun is one `docker run` example of the Dockerfile's comment: the
// variables it sets with -e and the command after the image (none: the
// image's CMD).
type dockerRun struct {
	line int
	env  map[string]string
	args []string
}

// dockerRuns reads the docker run examples of the Dockerfile's comment, so
// that each documented way to run the image is run for real.
func dockerRuns(t *testing.T) []dockerRun {
	t.Helper()
	b, err := os.ReadFile("../../configs/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var runs []dockerRun
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(string(b), "\n") {
		text, comment := strings.CutPrefix(strings.TrimSpace(line), "#")
		text = strings.TrimSpace(text)
		if !comment || (cur.Len() == 0 && !strings.HasPrefix(text, "docker run ")) {
			cur.Reset()
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if s, ok := strings.CutSuffix(text, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(text)
		runs = append(runs, parseDockerRun(t, start, cur.String()))
		cur.Reset()
	}
	return runs
}

// parseDockerRun reads the docker run flags the examples use; another flag
// fails the test, which must then learn what it means for the run.
func parseDockerRun(t *testing.T, line int, cmdline string) dockerRun {
	t.Helper()
	w, err := shellWords(cmdline)
	if err != nil {
		t.Fatalf("Dockerfile line %d: %v", line, err)
	}
	run := dockerRun{line: line, env: map[string]string{}}
	valued := []string{"-p", "--publish", "-v", "--volume", "-e", "--env", "--name", "--stop-timeout", "--restart"}
	for i := 2; i < len(w); i++ {
		if !strings.HasPrefix(w[i], "-") {
			if w[i] != "metanode" {
				t.Fatalf("Dockerfile line %d: docker run %s: want the image the build example tags, metanode", line, w[i])
			}
			run.args = w[i+1:]
			return run
		}
		name, val, hasVal := strings.Cut(w[i], "=")
		switch {
		case name == "-d" || name == "--detach" || name == "--rm":
			continue
		case !slices.Contains(valued, name):
			t.Fatalf("Dockerfile line %d: docker run %s: a flag this test does not know", line, w[i])
		case !hasVal:
			if i++; i == len(w) {
				t.Fatalf("Dockerfile line %d: docker run %s: no value", line, name)
			}
			val = w[i]
		}
		if name == "-e" || name == "--env" {
			k, v, ok := strings.Cut(val, "=")
			if !ok {
				t.Fatalf("Dockerfile line %d: -e %s passes the host's variable: give its value", line, val)
			}
			run.env[k] = v
		}
	}
	t.Fatalf("Dockerfile line %d: docker run without an image", line)
	return run
}

// TestContainer_Dockerfile runs every docker run example of the
// Dockerfile's comment (a home node on the image's CMD, a bootstrap node)
// as docker would: see runImage.
func TestContainer_Dockerfile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	im := parseImage(t, readDockerfile(t))
	if len(im.entrypoint) == 0 || len(im.health) == 0 || im.user == "" {
		t.Fatalf("Dockerfile: ENTRYPOINT %q, HEALTHCHECK %q, USER %q: want all three", im.entrypoint, im.health, im.user)
	}
	runs := dockerRuns(t)
	onCMD, bootstrap := false, false
	for _, run := range runs {
		onCMD = onCMD || len(run.args) == 0
		bootstrap = bootstrap || slices.Contains(run.args, "bootstrap")
	}
	if !onCMD || !bootstrap {
		t.Fatalf("the Dockerfile's comment has %d docker run examples: want one on the image's CMD and one of a bootstrap node", len(runs))
	}
	for _, run := range runs {
		t.Run(fmt.Sprintf("line%d", run.line), func(t *testing.T) {
			t.Parallel()
			runImage(t, im, run)
		})
	}
}

// runImage runs the image as docker would for run: its ENV (and nothing
// else: no HOME but the Dockerfile's) with run's -e over it, its USER, its
// volumes as temp dirs, ENTRYPOINT with run's command or CMD, HEALTHCHECK
// CMD until ok, then STOPSIGNAL and a clean exit.
func runImage(t *testing.T, im image, run dockerRun) {
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
	for k, v := range run.env {
		env[k] = rooted(root, v)
	}
	argv := append(slices.Clone(im.entrypoint), cmpOrSlice(run.args, im.cmd)...)

	// What the container's node would listen on, from its own loader.
	cfg, layers := effectiveConfig(t, env, argv[1:])
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
	// A files root the profile dropped (a bootstrap node's) is the image's
	// all the same: its volume is not a wrong variable.
	ignoredFiles := ""
	for _, ig := range layers.ignored {
		if ig.field == "files" {
			ignoredFiles = ig.value
		}
	}
	for _, v := range im.volumes { // each volume is the data or the files root: a volume nobody reads is a wrong variable
		if p := filepath.Join(root, v); p != cfg.Data && p != cmpOr(cfg.Files, ignoredFiles) {
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
	env["METANODE_BEACON"] = "false" // no multicast from tests (the beacon's own run in a namespace)
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
	if cfg.Files == "" && h.Checks["watcher"] != "off" {
		t.Errorf("no files root: the watcher is %q, want off", h.Checks["watcher"])
	}
	// What the profile dropped, serve says at WARN (docker logs shows it).
	for _, ig := range layers.ignored {
		if want := fmt.Sprintf("level=WARN msg=%q", ig.field+" ignored: "+ig.why); !strings.Contains(srv.logs.String(), want) {
			t.Errorf("the logs lack %s", want)
		}
	}
	// Other containers reach the node by its service name (meta-core, as
	// the meta services call it, or metanode), which the image allows; any
	// other name is a rebinding page's and is refused.
	for host, want := range map[string]int{"meta-core:9000": 200, "metanode:9000": 200, "rebind.example:9000": 403} {
		req, err := http.NewRequest("GET", apiURL+"/health", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("the image's node answers Host %s with %d, want %d", host, resp.StatusCode, want)
		}
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
