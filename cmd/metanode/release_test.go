package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// releaseTag and releaseDate are the tag and commit time of the clean tree
// TestRelease_CleanTree builds from.
const (
	releaseTag  = "v0.0.0-releasetest"
	releaseDate = "2026-01-02T03:04:05Z"
)

// cleanTree copies the repository's files (tracked and new, not ignored)
// into a new git repository with one commit, tagged releaseTag: what a
// fresh clone of a release tag holds. The commit is the same bytes in
// every copy (fixed author, dates and content), so two copies build alike.
func cleanTree(t *testing.T, ctx context.Context, root string) (dir, head string) {
	t.Helper()
	files, err := exec.CommandContext(ctx, "git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): the release test builds from one", err)
	}
	dir = t.TempDir()
	for name := range strings.SplitSeq(strings.TrimRight(string(files), "\x00"), "\x00") {
		src := filepath.Join(root, name)
		fi, err := os.Lstat(src)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or not a file
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) string {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "user.name=release test", "-c", "user.email=release@example.org", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_DATE="+releaseDate, "GIT_COMMITTER_DATE="+releaseDate)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "release test")
	git("tag", releaseTag)
	return dir, git("rev-parse", "HEAD")
}

// readSums parses a sha256sum file: name -> hex digest.
func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	line := regexp.MustCompile(`^([0-9a-f]{64})  (\S+)$`)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("%s: %q is not a sha256sum line", path, sc.Text())
		}
		sums[m[2]] = m[1]
	}
	return sums
}

// TestRelease_CleanTree runs `make release` in two fresh copies of the
// repository at different paths, for this machine's platform (the other
// platforms are the same command with other GOOS/GOARCH; building them here
// would compile the whole dependency tree again per platform). It checks
// the artefact names, the checksum file against the files, that both
// copies built the same bytes (reproducible: -trimpath, stamps from the
// commit, not the clock), that the binary is static and says the tag,
// commit and date it was built from; and that a plain `go build` of the
// tagged tree reports the same version from Go's build information.
func TestRelease_CleanTree(t *testing.T) {
	if testing.Short() {
		t.Skip("builds release binaries")
	}
	t.Parallel()
	for _, tool := range []string{"git", "make", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s on this machine: make release needs it", tool)
		}
	}
	buildBinary(t) // the same compile flags (-trimpath): the packages come from the build cache
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	name := "metanode-" + releaseTag + "-" + runtime.GOOS + "-" + runtime.GOARCH
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	var sums []map[string]string
	var dirs []string
	var head string
	for range 2 {
		dir, h := cleanTree(t, ctx, root)
		head = h
		cmd := exec.CommandContext(ctx, "make", "release", "PLATFORMS="+platform)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make release: %v\n%s", err, out)
		}
		s := readSums(t, filepath.Join(dir, "dist", "SHA256SUMS"))
		if len(s) != 1 || s[name] == "" {
			t.Fatalf("dist/SHA256SUMS lists %v, want only %s", s, name)
		}
		b, err := os.ReadFile(filepath.Join(dir, "dist", name))
		if err != nil {
			t.Fatal(err)
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != s[name] {
			t.Fatalf("dist/SHA256SUMS says %s for %s; the file's is %x", s[name], name, got)
		}
		sums, dirs = append(sums, s), append(dirs, dir)
	}
	if sums[0][name] != sums[1][name] {
		t.Errorf("two builds of one commit at different paths differ: %s and %s (not reproducible)", sums[0][name], sums[1][name])
	}
	bin := filepath.Join(dirs[0], "dist", name)
	if runtime.GOOS == "linux" {
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s has a program interpreter: not static", name)
			}
		}
		f.Close()
	}
	want := buildInfo{Version: releaseTag, Commit: head, Date: releaseDate, Go: runtime.Version(), Platform: platform}
	checkVersion(t, ctx, bin, want)

	// Unstamped: go build in the tagged checkout. Go records the tag as the
	// module's version and the commit and its time (-buildvcs=true: the
	// default, unless GOFLAGS turned it off, as on some CI machines).
	plain := filepath.Join(t.TempDir(), "metanode")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=true", "-o", plain, "./cmd/metanode")
	cmd.Dir = dirs[1]
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	checkVersion(t, ctx, plain, want)

	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^PLATFORMS\s*\?=\s*(.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no PLATFORMS")
	}
	for _, p := range []string{"linux/amd64", "linux/arm64", "darwin/arm64", "windows/amd64"} {
		if !slices.Contains(strings.Fields(string(m[1])), p) {
			t.Errorf("make release does not build %s (PLATFORMS = %s)", p, m[1])
		}
	}
}

func checkVersion(t *testing.T, ctx context.Context, bin string, want buildInfo) {
	t.Helper()
	out, err := exec.CommandContext(ctx, bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("%s version --json: %v", bin, err)
	}
	var got buildInfo
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("version --json: %v: %s", err, out)
	}
	if got != want {
		t.Errorf("%s version --json:\n got %+v\nwant %+v", filepath.Base(bin), got, want)
	}
	text, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"metanode " + want.Version + "\n", want.Commit, want.Date, want.Go} {
		if !bytes.Contains(text, []byte(w)) {
			t.Errorf("version says %q: no %q", text, w)
		}
	}
}
