//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/internal/netnstest"
	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/store"
)

// Addresses the exposure test gives lo in its namespace: a LAN declared
// local, and another network and an IPv6 address that are not.
const (
	exLAN      = "192.168.77.2"
	exForeign  = "198.51.100.7"
	exLAN6     = "fd00:77::2"
	exForeign6 = "2001:db8::7"
)

// fromAddr is an HTTP client whose connections leave from src.
func fromAddr(src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, Proxy: nil}}
}

// hostile is one request of the exposure attack: the house keys.
type hostile struct{ method, path, body string }

func exposureAttack(t *testing.T) []hostile {
	w, err := store.GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	c := w.Text("bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy", "title", "EVIL", uint64(time.Now().UnixMilli()))
	b, _ := json.Marshal(map[string]any{"claims": []any{c.ToJSON(false)}})
	return []hostile{
		{"POST", "/api/claims", string(b)}, // auto-trusts its signer
		{"POST", "/api/swarm/invite", `{}`},
		{"PUT", "/api/trust/" + w.UID(), ""},
		{"PUT", "/api/kv/value", `{"key":"sorter:cursor","value":"x"}`},
		{"POST", "/api/metadata/clear", ""},
		{"GET", "/api/kv/value?key=sorter:cursor", ""},
		{"GET", "/api/metadata/list", ""},
		{"GET", "/api/trust", ""},
		{"POST", "/api/merge", `{"claims":[]}`},
	}
}

func send(t *testing.T, hc *http.Client, base string, h hostile, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(h.method, base+h.path, strings.NewReader(h.body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", h.method, h.path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The API listening on every interface, IPv4 and IPv6, with a LAN and a
// ULA prefix declared local: callers from another network or a global
// IPv6 address get 401 on every route of the exposure attack (auto-trusted
// claims, pairing codes, trust changes, kv writes, clear, reads of the
// library and kv) and nothing changes; /health answers them; the same
// requests with the API token, or from the declared networks, are served.
// The node logs at WARN that it listens beyond loopback.
func TestE2E_ExposedAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Setenv(binaryEnv, buildBinary(t)) // built once, outside the namespace
	if !netnstest.Enter(t, "ip addr add "+exLAN+"/32 dev lo", "ip addr add "+exForeign+"/32 dev lo",
		"ip addr add "+exLAN6+"/128 dev lo nodad", "ip addr add "+exForeign6+"/128 dev lo nodad") {
		return
	}
	data := filepath.Join(t.TempDir(), "data")
	srv := startServe(t, data, "--http", "[::]:0", "--local-networks", "192.168.77.0/24,fd00:77::/64")
	u, err := url.Parse(srv.url)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	waitLog(t, srv, "the API listens beyond loopback")
	tok, err := os.ReadFile(filepath.Join(data, node.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(data, node.TokenFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("api.token: %v %v, want mode 0600", fi, err)
	}
	bearer := "Bearer " + strings.TrimSpace(string(tok))
	loopback := "http://127.0.0.1:" + port
	local := api.NewClient(loopback)
	defer local.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if code, body := send(t, http.DefaultClient, loopback, hostile{"PUT", "/api/kv/value", `{"key":"sorter:cursor","value":"kept"}`}); code != 200 {
		t.Fatalf("kv write from loopback: %d %s", code, body)
	}

	for _, target := range []struct{ src, dst string }{{exForeign, exLAN}, {exForeign6, "[" + exLAN6 + "]"}} {
		hc := fromAddr(target.src)
		base := "http://" + target.dst + ":" + port
		for _, h := range exposureAttack(t) {
			code, body := send(t, hc, base, h)
			if code != http.StatusUnauthorized || !strings.Contains(body, `"unauthorized"`) {
				t.Errorf("%s %s from %s: %d %s", h.method, h.path, target.src, code, body)
			}
			if strings.Contains(body, "kept") {
				t.Errorf("%s %s from %s leaked the kv: %s", h.method, h.path, target.src, body)
			}
		}
		if code, body := send(t, hc, base, hostile{"GET", "/health", ""}); code != 200 {
			t.Errorf("health from %s: %d %s", target.src, code, body)
		}
		if code, body := send(t, hc, base, hostile{"GET", "/api/kv/value?key=sorter:cursor", ""}, "Authorization", bearer); code != 200 || !strings.Contains(body, "kept") {
			t.Errorf("kv read with the token from %s: %d %s", target.src, code, body)
		}
	}
	// Nothing the refused callers sent changed anything.
	if code, body := send(t, http.DefaultClient, loopback, hostile{"GET", "/api/kv/value?key=sorter:cursor", ""}); code != 200 || !strings.Contains(body, `"kept"`) {
		t.Errorf("the kv after the attack: %d %s", code, body)
	}
	tl, err := local.Trust(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := listed(tl); n != 0 {
		t.Errorf("the attack put %d signers on the trust list: %+v", n, tl.Trusted)
	}

	// From the declared networks, the whole API, auto-trust included.
	for _, target := range []struct{ src, dst string }{{exLAN, exLAN}, {exLAN6, "[" + exLAN6 + "]"}} {
		hc := fromAddr(target.src)
		base := "http://" + target.dst + ":" + port
		h := exposureAttack(t)[0]
		code, body := send(t, hc, base, h)
		if code != 200 || !strings.Contains(body, `"accepted":1`) {
			t.Errorf("a claim from the local network %s: %d %s", target.src, code, body)
		}
	}
	tl, err = local.Trust(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := listed(tl); n != 2 {
		t.Errorf("local writers from the declared networks: %d trusted, want 2: %+v", n, tl.Trusted)
	}
	srv.stop(t)
}

// listed counts the trust list's rows (the node's own uid aside).
func listed(tl api.TrustList) int {
	n := 0
	for _, e := range tl.Trusted {
		if e.Source == "list" {
			n++
		}
	}
	return n
}

// Listening beyond loopback is safe with the token alone; declaring every
// address local is refused at start with how to fix it.
func TestE2E_LocalNetworksRefusesEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	for _, n := range []string{"0.0.0.0/0", "::/0"} {
		out := binCLIAllowing(t, "serve", "--data", t.TempDir(), "--http", "127.0.0.1:0", "--local-networks", n)
		if !strings.Contains(out, "every address local") || !strings.Contains(out, "local-networks") {
			t.Errorf("serve --local-networks %s: %s", n, out)
		}
	}
}

// composeEnv is meta-core's environment in configs/compose.yml over the
// image's ENV.
func composeEnv(t *testing.T) map[string]string {
	t.Helper()
	env := parseImage(t, readDockerfile(t)).env
	b, err := os.ReadFile(filepath.Join("..", "..", "configs", "compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	maps.Copy(env, c.Services["meta-core"].Environment)
	return env
}

// In the shipped compose setup a container calls the node by its service
// name, http://meta-core:9000/, and reads and writes with no setting of
// its own: the image answers the name and the compose file declares its
// network local. A web page on another origin, from the same network,
// still can neither read nor write; a caller from outside the network
// gets 401. The container's address is one of the compose subnet's, given
// to lo in a private network namespace.
func TestE2E_ComposeServiceName(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Setenv(binaryEnv, buildBinary(t))
	env := composeEnv(t)
	subnet, err := netip.ParsePrefix(env["METANODE_LOCAL_NETWORKS"])
	if err != nil {
		t.Fatalf("compose.yml: METANODE_LOCAL_NETWORKS %q: %v", env["METANODE_LOCAL_NETWORKS"], err)
	}
	container := subnet.Addr().Next().Next().String() // …2: a meta service
	if !netnstest.Enter(t, "ip addr add "+container+"/32 dev lo", "ip addr add "+exForeign+"/32 dev lo") {
		return
	}
	dir := t.TempDir()
	var vars []string
	for k, v := range env {
		switch k {
		case "METANODE_HTTP", "METANODE_API", "METANODE_DATA", "FILES_PATH", "HOME", "TMPDIR", "META_CORE_PATH":
			continue // paths of the image: this test's own below
		}
		vars = append(vars, k+"="+v)
	}
	vars = append(vars, "HOME="+dir, "META_CORE_PATH="+filepath.Join(dir, "meta-core"))
	data := filepath.Join(dir, "data")
	srv := startArgs(t, data, []string{"serve", "--data", data, "--http", "0.0.0.0:0", "--listen", "/ip4/127.0.0.1/tcp/0",
		"--no-mdns", "--log-format", "json"}, vars...)
	u, err := url.Parse(srv.url)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + container + ":" + u.Port()
	hc := fromAddr(container)
	host := []string{"Host", "meta-core:9000"}
	w := exposureAttack(t)
	for _, h := range []hostile{w[3], w[0], w[5], w[6], {"GET", "/urls", ""}} {
		code, body := send(t, hc, base, h, host...)
		if code != 200 {
			t.Errorf("%s %s from the compose network as meta-core: %d %s", h.method, h.path, code, body)
		}
	}
	// A foreign page in a browser on that network, and a caller outside it.
	for _, h := range w[:7] {
		if code, body := send(t, hc, base, h, append(host, "Origin", "http://evil.example", "Content-Type", "text/plain")...); code != http.StatusForbidden {
			t.Errorf("%s %s from a foreign page: %d %s", h.method, h.path, code, body)
		}
		if code, body := send(t, fromAddr(exForeign), "http://"+container+":"+u.Port(), h, host...); code != http.StatusUnauthorized {
			t.Errorf("%s %s from outside the compose network: %d %s", h.method, h.path, code, body)
		}
	}
	srv.stop(t)
}

// peakRSS is a process's peak resident set (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// 32 clients each send a maximum-size (16 MiB) claims body at once to the
// real binary: the body budget keeps the node's peak RSS under the
// 300 MB memory goal (it took 897 MB without one); every request is
// answered, 200 or 503 busy with Retry-After, and the busy ones get in
// when sent again.
func TestE2E_BodyBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := startServe(t, filepath.Join(t.TempDir(), "data"))
	const clients = 32
	body := []byte(`{"claims":["` + strings.Repeat("a", api.MaxClaimsBody-32) + `"]}`)
	hc := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxConnsPerHost: clients, MaxIdleConnsPerHost: clients}}
	defer hc.CloseIdleConnections()
	post := func() (int, string) {
		resp, err := hc.Post(srv.url+"/api/claims", "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
			return 0, "503 without Retry-After: " + string(b)
		}
		return resp.StatusCode, string(b)
	}
	type answer struct {
		code int
		body string
	}
	answers := make(chan answer, clients)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			code, body := post()
			answers <- answer{code, body}
		})
	}
	wg.Wait()
	close(answers)
	served, busy := 0, 0
	for a := range answers {
		switch {
		case a.code == 200 && strings.Contains(a.body, `"rejected":1`):
			served++
		case a.code == http.StatusServiceUnavailable && strings.Contains(a.body, `"busy"`):
			busy++
		default:
			t.Errorf("answer %d %.300s", a.code, a.body)
		}
	}
	peak := peakRSS(t, srv.cmd.Process.Pid)
	t.Logf("%d concurrent 16 MiB bodies: %d served, %d busy; peak RSS %d MB", clients, served, busy, peak/1e6)
	if peak >= 300e6 {
		t.Errorf("peak RSS %d MB under %d concurrent 16 MiB bodies, want < 300 MB", peak/1e6, clients)
	}
	for i := 0; i < min(busy, 2); i++ { // a refused body gets in when sent again
		for try := 0; ; try++ {
			code, b := post()
			if code == 200 {
				break
			}
			if code != http.StatusServiceUnavailable || try == 20 {
				t.Fatalf("resending a refused body: %d %.300s", code, b)
			}
		}
	}
	srv.stop(t)
}

// The client commands send the token in the data directory to the node
// that directory's config names, so a node listening only on a LAN
// address (where even its own machine is not loopback) is still theirs;
// an --api they are pointed at elsewhere gets no token unless
// METANODE_API_TOKEN gives one.
func TestE2E_CLISendsToken(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Setenv(binaryEnv, buildBinary(t))
	if !netnstest.Enter(t, "ip addr add "+exForeign+"/32 dev lo") {
		return
	}
	data := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(exForeign, freePort(t))
	if err := os.WriteFile(filepath.Join(data, node.ConfigFile), []byte("http: "+addr+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startArgs(t, data, []string{"serve", "--data", data, "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns", "--log-format", "json"}, "HOME="+t.TempDir())
	cli := func(want int, env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command(buildBinary(t), args...)
		cmd.Env = append(os.Environ(), append([]string{"HOME=" + t.TempDir()}, env...)...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		if code != want {
			t.Errorf("metanode %s: exit %d, want %d: %s", strings.Join(args, " "), code, want, out)
		}
		return string(out)
	}
	cli(0, nil, "status", "--data", data) // the config's address, the data directory's token
	out := cli(1, nil, "status", "--data", data, "--api", "http://"+addr)
	if !strings.Contains(out, "unauthorized") {
		t.Errorf("an explicit --api got a token: %s", out)
	}
	tok, err := os.ReadFile(filepath.Join(data, node.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	cli(0, []string{"METANODE_API_TOKEN=" + strings.TrimSpace(string(tok))}, "status", "--api", "http://"+addr)
	srv.stop(t)
}
