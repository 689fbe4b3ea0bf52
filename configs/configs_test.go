// Package configs holds the shipped deployment files. These tests read them
// as text (cmd/metanode/container_test.go runs them): the Dockerfile builds
// as make build does, its usage lines stamp the version and allow for the
// graceful stop, and its ignore file keeps what the build reads.
package configs

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// apiClose is the longest the node's API may take to close: the drain,
// then as long again for handlers cut at its end (api.DefaultShutdownTimeout
// twice; this package imports nothing of the module).
const apiClose = 20 * time.Second

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// goBuild is a go build command line as words: its environment, then the
// flags and packages, without -o (where the binary goes differs).
func goBuild(t *testing.T, line string) []string {
	t.Helper()
	line = strings.NewReplacer(`"`, "", `'`, "").Replace(line)
	var out []string
	w := strings.Fields(line)
	for i := 0; i < len(w); i++ {
		if w[i] == "-o" {
			i++
			continue
		}
		out = append(out, w[i])
	}
	if i := slices.Index(out, "go"); i < 0 || i+1 >= len(out) || out[i+1] != "build" {
		t.Fatalf("%q is not a go build", line)
	}
	return out
}

// TestBuildLine: the Dockerfile's build line is make build's (static,
// trimmed, stripped, version stamped).
func TestBuildLine(t *testing.T) {
	mk := read(t, "../Makefile")
	vars := map[string]string{"VERSION": "<VERSION>"}
	for _, m := range regexp.MustCompile(`(?m)^(\w+)\s*[:?]?=\s*(.*)$`).FindAllStringSubmatch(mk, -1) {
		if m[1] != "VERSION" {
			vars[m[1]] = m[2]
		}
	}
	ref := regexp.MustCompile(`\$[({](\w+)[)}]`)
	expand := func(s string) string {
		for range 5 { // nested variables, bounded
			s = ref.ReplaceAllStringFunc(s, func(r string) string {
				if v, ok := vars[strings.Trim(r, "${}()")]; ok {
					return v
				}
				return r
			})
		}
		return s
	}
	m := regexp.MustCompile(`(?m)^build:.*\n\t(.*)$`).FindStringSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no build recipe")
	}
	df := strings.ReplaceAll(read(t, "Dockerfile"), "\\\n", " ")
	d := regexp.MustCompile(`(?m)^RUN (?:.*&&\s*)?(CGO_ENABLED=\S+ go build [^&\n]*)`).FindStringSubmatch(df)
	if d == nil {
		t.Fatal("Dockerfile: no RUN with CGO_ENABLED=… go build")
	}
	mb, db := goBuild(t, expand(m[1])), goBuild(t, expand(d[1]))
	if !slices.Equal(mb, db) {
		t.Errorf("make build and the Dockerfile build differently:\nmake:   %q\ndocker: %q", mb, db)
	}
	line := strings.Join(db, " ")
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-s -w", "-X main.version=<VERSION>", "./cmd/metanode"} {
		if !strings.Contains(line, want) {
			t.Errorf("the Dockerfile's build line lacks %s: %s", want, line)
		}
	}
	if !regexp.MustCompile(`(?m)^ARG VERSION\b`).MatchString(df) {
		t.Error("the Dockerfile has no ARG VERSION for its build line")
	}
}

// TestDockerUsage: the Dockerfile's own docker commands stamp the version
// and give the node time for its graceful stop (docker stop's default grace
// is 10 s, then SIGKILL).
func TestDockerUsage(t *testing.T) {
	usage := strings.ReplaceAll(read(t, "Dockerfile"), "\\\n#", "") // continued comment lines, joined
	build := regexp.MustCompile(`(?m)^#\s+docker build .*$`).FindString(usage)
	if !strings.Contains(build, "--build-arg VERSION=") {
		t.Errorf("the docker build example does not stamp VERSION (the image would say dev): %q", build)
	}
	runs := regexp.MustCompile(`(?m)^#\s+docker run .*$`).FindAllString(usage, -1)
	if len(runs) == 0 {
		t.Fatal("the Dockerfile has no docker run example")
	}
	for _, run := range runs { // a home node's and a bootstrap node's
		m := regexp.MustCompile(`--stop-timeout[ =](\d+)`).FindStringSubmatch(run)
		if m == nil {
			t.Errorf("the docker run example has no --stop-timeout: %q", run)
			continue
		}
		if n, _ := strconv.Atoi(m[1]); time.Duration(n)*time.Second <= apiClose {
			t.Errorf("--stop-timeout %s: the API's close alone may take %v", m[1], apiClose)
		}
	}
}

// ignoreRule is one .dockerignore line as a regexp; a pattern also matches
// everything under a directory it matches.
type ignoreRule struct {
	re      *regexp.Regexp
	include bool // a "!" line
}

func readIgnore(t *testing.T, path string) []ignoreRule {
	t.Helper()
	var rules []ignoreRule
	for line := range strings.SplitSeq(read(t, path), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		var r ignoreRule
		line, r.include = strings.CutPrefix(line, "!")
		line = strings.TrimPrefix(filepath.Clean(line), "/")
		var re strings.Builder
		for i := 0; i < len(line); i++ {
			switch {
			case strings.HasPrefix(line[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(line[i:], "**"):
				re.WriteString(".*")
				i++
			case line[i] == '*':
				re.WriteString("[^/]*")
			case line[i] == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(line[i : i+1]))
			}
		}
		r.re = regexp.MustCompile("^" + re.String() + "(/.*)?$")
		rules = append(rules, r)
	}
	return rules
}

// ignored: the last rule that matches decides.
func ignored(rules []ignoreRule, path string) bool {
	out := false
	for _, r := range rules {
		if r.re.MatchString(path) {
			out = !r.include
		}
	}
	return out
}

// TestDockerIgnore: Dockerfile.dockerignore (BuildKit's ignore file for
// this Dockerfile) keeps every file the build reads: go.mod, go.sum, and
// the sources and embedded files of each module package the binary links.
// It drops the heavy strays.
func TestDockerIgnore(t *testing.T) {
	rules := readIgnore(t, "Dockerfile.dockerignore")
	modRoot, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "list", "-deps", "-f",
		`{{if .Module}}{{if .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}
{{end}}{{range .SFiles}}{{$d}}/{{.}}
{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}
{{end}}{{end}}{{end}}`, "../cmd/metanode").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	need := []string{"go.mod", "go.sum"}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		rel, err := filepath.Rel(modRoot, line)
		if err != nil {
			t.Fatal(err)
		}
		need = append(need, filepath.ToSlash(rel))
	}
	if !slices.Contains(need, "cmd/metanode/default.yml") || !slices.Contains(need, "store/claim.go") {
		t.Fatalf("go list found neither the embedded default.yml nor store's sources among %d files: the listing is wrong", len(need))
	}
	for _, p := range need {
		if ignored(rules, p) {
			t.Errorf("the build needs %s, which Dockerfile.dockerignore leaves out", p)
		}
	}
	for _, p := range []string{".git/HEAD", "bin/metanode", "metanode", "store.test", "swarm/x.test", "data/truth.db"} {
		if !ignored(rules, p) {
			t.Errorf("%s goes into the build context", p)
		}
	}
}

// TestDockerImageMetadata: the image carries the OCI labels a registry and
// a person look for (stamped with the version, commit and date the binary
// is), a health check, and builds for any target platform from the
// builder's own (docker buildx --platform linux/amd64,linux/arm64).
func TestDockerImageMetadata(t *testing.T) {
	df := strings.ReplaceAll(read(t, "Dockerfile"), "\\\n", " ")
	final := df[strings.LastIndex(df, "\nFROM "):]
	for _, label := range []string{"title", "description", "licenses=\"Apache-2.0\"", "source", "version=\"${VERSION}\"", "revision=\"${COMMIT}\"", "created=\"${DATE}\""} {
		if !strings.Contains(final, "org.opencontainers.image."+label) {
			t.Errorf("the image has no OCI label org.opencontainers.image.%s", label)
		}
	}
	if !regexp.MustCompile(`(?m)^ARG VERSION\S* COMMIT\S* DATE`).MatchString(final) {
		t.Error("the final stage does not declare ARG VERSION COMMIT DATE for its labels")
	}
	if !regexp.MustCompile(`(?m)^HEALTHCHECK .*CMD \["/metanode", "health"\]`).MatchString(final) {
		t.Error("the image has no HEALTHCHECK running metanode health")
	}
	build := df[:strings.LastIndex(df, "\nFROM ")]
	for _, want := range []string{"FROM --platform=$BUILDPLATFORM ", "ARG TARGETOS TARGETARCH", "GOOS=${TARGETOS}", "GOARCH=${TARGETARCH}", "-X main.commit=${COMMIT}", "-X main.date=${DATE}"} {
		if !strings.Contains(build, want) {
			t.Errorf("the build stage lacks %q (multi-arch, stamped build)", want)
		}
	}
	mk := read(t, "../Makefile")
	m := regexp.MustCompile(`(?m)^image:.*\n((?:\t.*\n)+)`).FindStringSubmatch(mk)
	if m == nil || !strings.Contains(m[1], "buildx build -f configs/Dockerfile --platform $(IMAGE_PLATFORMS)") {
		t.Error("make image does not build configs/Dockerfile for IMAGE_PLATFORMS with buildx")
	}
	if !regexp.MustCompile(`(?m)^IMAGE_PLATFORMS \?= linux/amd64,linux/arm64$`).MatchString(mk) {
		t.Error("make image's default platforms are not linux/amd64,linux/arm64")
	}
}
