package configs

import (
	"cmp"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// composeFile is the part of the Compose specification compose.yml uses.
type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Networks map[string]any            `yaml:"networks"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Build *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Image           string                    `yaml:"image"`
	Hostname        string                    `yaml:"hostname"`
	Profiles        []string                  `yaml:"profiles"`
	StopGracePeriod string                    `yaml:"stop_grace_period"`
	Environment     map[string]string         `yaml:"environment"`
	Ports           []string                  `yaml:"ports"`
	Volumes         []string                  `yaml:"volumes"`
	DependsOn       map[string]map[string]any `yaml:"depends_on"`
	Networks        []string                  `yaml:"networks"`
	Restart         string                    `yaml:"restart"`
}

// metaServices are the consumers the compose file holds places for.
var metaServices = []string{"meta-sort", "meta-fuse", "meta-stremio"}

func readCompose(t *testing.T) composeFile {
	t.Helper()
	var c composeFile
	dec := yaml.NewDecoder(strings.NewReader(read(t, "compose.yml")))
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("compose.yml: %v", err)
	}
	return c
}

// dockerEnv reads the Dockerfile's ENV pairs (the last stage's and the
// build's alike: only the running image sets any).
func dockerEnv(t *testing.T) map[string]string {
	t.Helper()
	df := strings.ReplaceAll(read(t, "Dockerfile"), "\\\n", " ")
	env := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^ENV (.*)$`).FindAllStringSubmatch(df, -1) {
		for kv := range strings.FieldsSeq(m[1]) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = v
			}
		}
	}
	return env
}

// volumeTargets maps each mount's path in the container to its source
// (source:target[:mode]; a source may be a ${VAR:-default} holding colons).
func volumeTargets(t *testing.T, svc string, vols []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, v := range vols {
		src, rest := "", v
		if strings.HasPrefix(v, "${") {
			end := strings.Index(v, "}")
			if end < 0 {
				t.Errorf("%s: volume %q: unclosed ${", svc, v)
				continue
			}
			src, rest = v[:end+1], strings.TrimPrefix(v[end+1:], ":")
		} else {
			src, rest, _ = strings.Cut(v, ":")
		}
		target, _, _ := strings.Cut(rest, ":")
		if src == "" || !strings.HasPrefix(target, "/") {
			t.Errorf("%s: volume %q is not source:target[:mode]", svc, v)
			continue
		}
		out[target] = src
	}
	return out
}

// TestCompose: configs/compose.yml runs metanode as the service meta-core
// built from this repository's Dockerfile, with the data directory and the
// files root on volumes, the API published on the host's loopback only,
// and a place for each meta service that calls the core by its service
// name on the image's API port.
func TestCompose(t *testing.T) {
	t.Parallel()
	c := readCompose(t)
	core, ok := c.Services["meta-core"]
	if !ok {
		t.Fatalf("compose.yml has no service meta-core (services: %v)", slices.Sorted(maps.Keys(c.Services)))
	}
	if core.Build == nil {
		t.Fatal("meta-core: no build section: the image is this repository's")
	}
	root := filepath.Join(".", core.Build.Context)
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Errorf("meta-core: build context %q is not the repository root: %v", core.Build.Context, err)
	}
	if df := filepath.Join(root, core.Build.Dockerfile); !sameFile(t, df, "Dockerfile") {
		t.Errorf("meta-core: dockerfile %q is not configs/Dockerfile", core.Build.Dockerfile)
	}
	if core.Hostname != "meta-core" {
		t.Errorf("meta-core: hostname %q: /urls and the beacon hand out the host name (webdavUrlInternal), which the services resolve as meta-core", core.Hostname)
	}
	if d, err := time.ParseDuration(core.StopGracePeriod); err != nil || d <= apiClose {
		t.Errorf("meta-core: stop_grace_period %q: the API's close alone may take %v", core.StopGracePeriod, apiClose)
	}

	env := dockerEnv(t)
	_, apiPort, err := net.SplitHostPort(env["METANODE_HTTP"])
	if err != nil {
		t.Fatalf("Dockerfile: METANODE_HTTP %q: %v", env["METANODE_HTTP"], err)
	}
	published := false
	for _, p := range core.Ports {
		parts := strings.Split(p, ":")
		if parts[len(parts)-1] != apiPort {
			continue
		}
		published = true
		if len(parts) != 3 || !net.ParseIP(parts[0]).IsLoopback() {
			t.Errorf("meta-core: port %q publishes the API beyond the host's loopback", p)
		}
	}
	if !published {
		t.Errorf("meta-core: the API's port %s is not published (ports %v)", apiPort, core.Ports)
	}

	mounts := volumeTargets(t, "meta-core", core.Volumes)
	for _, target := range []string{env["METANODE_DATA"], env["FILES_PATH"], cmp.Or(core.Environment["META_CORE_PATH"], env["META_CORE_PATH"])} {
		if target == "" {
			t.Errorf("Dockerfile or compose.yml: a data, files or META_CORE_PATH directory is not set (ENV %v)", env)
			continue
		}
		src, ok := mounts[target]
		switch {
		case !ok:
			t.Errorf("meta-core: %s is not on a volume (volumes %v): it would die with the container", target, core.Volumes)
		case !strings.HasPrefix(src, "$") && !strings.HasPrefix(src, ".") && !strings.HasPrefix(src, "/"):
			if _, declared := c.Volumes[src]; !declared {
				t.Errorf("meta-core: named volume %q is not declared under volumes", src)
			}
		}
	}

	for _, name := range metaServices {
		svc, ok := c.Services[name]
		if !ok {
			t.Errorf("compose.yml has no placeholder for %s", name)
			continue
		}
		if svc.Image == "" {
			t.Errorf("%s: no image", name)
		}
		if _, ok := svc.DependsOn["meta-core"]; !ok {
			t.Errorf("%s: does not wait for meta-core", name)
		}
		if u := svc.Environment["META_CORE_URL"]; u != "" {
			pu, err := url.Parse(u)
			if err != nil || pu.Hostname() != "meta-core" || pu.Port() != apiPort {
				t.Errorf("%s: META_CORE_URL %q: want the service name and the API's port, http://meta-core:%s", name, u, apiPort)
			}
		}
		for _, n := range core.Networks {
			if !slices.Contains(svc.Networks, n) {
				t.Errorf("%s: not on meta-core's network %s: the beacon's multicast stays within one network", name, n)
			}
		}
		for target, src := range volumeTargets(t, name, svc.Volumes) {
			if _, declared := c.Volumes[src]; !declared && !strings.HasPrefix(src, "$") {
				t.Errorf("%s: volume %q (at %s) is not declared", name, src, target)
			}
		}
	}
	for _, n := range core.Networks {
		if _, ok := c.Networks[n]; !ok {
			t.Errorf("network %q is not declared", n)
		}
	}
	checkLocalNetworks(t, c, core)
}

// checkLocalNetworks: meta-core declares exactly the fixed subnets of its
// compose networks local (docs/http.md "Who may use the API"), so the meta
// services on them may write with no other setting; and it answers the
// service name as Host.
func checkLocalNetworks(t *testing.T, c composeFile, core composeService) {
	t.Helper()
	var subnets []string
	for _, n := range core.Networks {
		var nw struct {
			IPAM struct {
				Config []struct {
					Subnet string `yaml:"subnet"`
				} `yaml:"config"`
			} `yaml:"ipam"`
		}
		b, err := yaml.Marshal(c.Networks[n])
		if err == nil {
			err = yaml.Unmarshal(b, &nw)
		}
		if err != nil || len(nw.IPAM.Config) == 0 {
			t.Errorf("network %q has no fixed subnet (ipam.config[].subnet): meta-core cannot declare it local (%v)", n, err)
		}
		for _, cfg := range nw.IPAM.Config {
			p, err := netip.ParsePrefix(cfg.Subnet)
			if err != nil || !p.Addr().IsPrivate() {
				t.Errorf("network %q: subnet %q is not a private CIDR", n, cfg.Subnet)
			}
			subnets = append(subnets, cfg.Subnet)
		}
	}
	declared := strings.Split(cmp.Or(core.Environment["METANODE_LOCAL_NETWORKS"], dockerEnv(t)["METANODE_LOCAL_NETWORKS"]), ",")
	for i := range declared {
		declared[i] = strings.TrimSpace(declared[i])
	}
	if !slices.Equal(slices.Sorted(slices.Values(declared)), slices.Sorted(slices.Values(subnets))) {
		t.Errorf("meta-core: METANODE_LOCAL_NETWORKS %q, want its networks' subnets %q", declared, subnets)
	}
	allowed := strings.Split(cmp.Or(core.Environment["METANODE_HTTP_ALLOWED_HOSTS"], dockerEnv(t)["METANODE_HTTP_ALLOWED_HOSTS"]), ",")
	if !slices.Contains(allowed, "meta-core") || !slices.Contains(strings.Split(dockerEnv(t)["METANODE_HTTP_ALLOWED_HOSTS"], ","), "meta-core") {
		t.Errorf("meta-core is not an allowed Host name (compose %q, image %q)", allowed, dockerEnv(t)["METANODE_HTTP_ALLOWED_HOSTS"])
	}
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	return os.SameFile(fa, fb)
}
