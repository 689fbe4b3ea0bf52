package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestE2E_VersionStamped: the version given to the linker is the one the
// binary prints (make build stamps it with -X main.version).
func TestE2E_VersionStamped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if out := binCLI(t, nil, 0, "version"); !strings.HasPrefix(out, "metanode e2e-test\n") {
		t.Fatalf("version printed %q, want the stamped e2e-test", out)
	}
}

// TestProductFiles keeps the Makefile, the README and CI saying the same
// thing: make build is static and stamps the variable main really has, and
// make test, .ci/run and the README's test command are one command.
func TestProductFiles(t *testing.T) {
	read := func(p string) string {
		b, err := os.ReadFile("../../" + p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	mk, readme, ci := read("Makefile"), read("README.md"), read(".ci/run")
	recipe := func(target string) string {
		m := regexp.MustCompile(`(?m)^` + target + `:.*\n((?:\t.*\n)+)`).FindStringSubmatch(mk)
		if m == nil {
			t.Fatalf("Makefile has no %s target", target)
		}
		return m[1]
	}
	build := recipe("build")
	for _, want := range []string{"CGO_ENABLED=0", "./cmd/metanode", "$(LDFLAGS)"} {
		if !strings.Contains(build, want) {
			t.Errorf("make build lacks %s: %q", want, build)
		}
	}
	// The variables the linker sets must exist in package main.
	src := read("cmd/metanode/main.go")
	for _, v := range []string{"version", "commit", "date"} {
		if !strings.Contains(mk, "-X main."+v+"=") {
			t.Errorf("Makefile LDFLAGS do not stamp main.%s", v)
		}
		if !regexp.MustCompile(`(?m)^(var |\t)` + v + `\s+= ""`).MatchString(src) {
			t.Errorf("main.go has no package-level var %s for -X main.%s", v, v)
		}
	}
	const testCmd = "go test -race ./..."
	if !strings.Contains(recipe("test"), testCmd) {
		t.Errorf("make test is not %q: %q", testCmd, recipe("test"))
	}
	if !regexp.MustCompile(`(?m)^go test -race \./\.\.\.\s`).MatchString(readme) {
		t.Errorf("the README's test command is not %q", testCmd)
	}
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(testCmd) + `$`).MatchString(ci) {
		t.Errorf(".ci/run does not run %q", testCmd)
	}
	for _, target := range []string{"run", "check", "bench", "fuzz"} {
		recipe(target)
	}
	for _, tool := range []string{"gofmt -l", "go vet", "staticcheck"} {
		if !strings.Contains(recipe("check"), tool) && !strings.Contains(mk, tool) {
			t.Errorf("make check lacks %s", tool)
		}
	}
	if !strings.Contains(recipe("run"), "./cmd/metanode serve") || !strings.Contains(readme, "go run ./cmd/metanode serve") {
		t.Errorf("make run and the README's run command differ")
	}
}
