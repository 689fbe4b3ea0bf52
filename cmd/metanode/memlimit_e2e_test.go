package main

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestServe_MemoryLimit: the binary applies memory-limit to its own
// runtime, as its /metrics report it (go_gc_gomemlimit_bytes): auto's
// floor by default, a size when given, Go's default on a bootstrap node,
// and GOMEMLIMIT over the setting.
func TestServe_MemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		env   string
		want  float64
		logIs string
	}{
		{name: "auto", env: "GOMEMLIMIT=", want: memoryFloor, logIs: `"mode":"auto"`},
		{name: "size", args: []string{"--memory-limit", "300MiB"}, env: "GOMEMLIMIT=", want: 300 << 20},
		{name: "bootstrap", args: []string{"--profile", "bootstrap", "--listen", "/ip4/127.0.0.1/tcp/0"}, env: "GOMEMLIMIT=", want: 1<<63 - 1},
		{name: "GOMEMLIMIT wins", args: []string{"--memory-limit", "300MiB"}, env: "GOMEMLIMIT=200MiB", want: 200 << 20, logIs: "memory limit from GOMEMLIMIT"},
		{name: "GOMEMLIMIT too small", env: "GOMEMLIMIT=32MiB", want: 32 << 20, logIs: `"level":"WARN","msg":"memory limit from GOMEMLIMIT is below what a node needs`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			args := append([]string{"serve", "--data", data, "--http", "127.0.0.1:0", "--no-mdns", "--no-beacon", "--log-format", "json"}, tc.args...)
			if !strings.Contains(strings.Join(tc.args, " "), "--listen") {
				args = append(args, "--listen", "/ip4/127.0.0.1/tcp/0")
			}
			s := startArgs(t, data, args, "HOME="+t.TempDir(), tc.env)
			defer s.stop(t)
			if got := gaugeValue(t, s.url+"/metrics", "go_gc_gomemlimit_bytes"); got != tc.want {
				t.Errorf("go_gc_gomemlimit_bytes = %.0f, want %.0f", got, tc.want)
			}
			if tc.logIs != "" && !strings.Contains(s.logs.String(), tc.logIs) {
				t.Errorf("logs do not say %s:\n%s", tc.logIs, s.logs.String())
			}
		})
	}
}

// gaugeValue reads one unlabelled sample from a Prometheus text page.
func gaugeValue(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("%s not on %s", name, url)
	return 0
}
