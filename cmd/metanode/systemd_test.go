//go:build linux

package main

// configs/metanode.service run for real without systemd (see
// container_test.go for the Dockerfile).

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metanode/metanode/api"
)

// instr is one Dockerfile instruction, continuation lines joined.
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
	cfg, _ := effectiveConfig(t, env, start[1:])
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
	// comment says to), the swarm's addresses, mDNS and the beacon.
	port := freePort(t)
	apiURL := "http://127.0.0.1:" + port
	env["METANODE_HTTP"], env["METANODE_API"] = "127.0.0.1:"+port, apiURL
	listen := loopbackListen(t, cfg.Listen)
	env["METANODE_LISTEN"], env["METANODE_MDNS"] = strings.Join(listen, ","), "false"
	env["METANODE_BEACON"] = "false"
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

// TestSystemdUnitSecurity: systemd's own score of the unit's sandbox
// (systemd-analyze security, offline: no running systemd needed) stays at
// 2.0 or below, "OK" on its scale.
func TestSystemdUnitSecurity(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze on this machine (Debian package systemd; .ci/run installs it): the unit's sandbox is not scored")
	}
	out, err := exec.Command(sa, "security", "--offline=yes", "--no-pager", "../../configs/metanode.service").CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security --offline=yes: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for \S+: (\d+\.\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security printed no overall exposure:\n%s", out)
	}
	score, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	if score > 2.0 {
		t.Errorf("the unit's exposure is %.1f, want at most 2.0:\n%s", score, out)
	}
}
