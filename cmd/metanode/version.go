package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// buildInfo is what `metanode version` prints and metanode_build_info
// carries.
type buildInfo struct {
	Version  string `json:"version"`  // v1.2.3, a Go pseudo-version, or dev
	Commit   string `json:"commit"`   // the git revision, "" when unknown
	Modified bool   `json:"modified"` // built from a tree with uncommitted changes
	Date     string `json:"date"`     // the commit's time (RFC 3339, UTC), "" when unknown
	Go       string `json:"go"`       // the toolchain, e.g. go1.26.8
	Platform string `json:"platform"` // GOOS/GOARCH
}

// buildVersion takes the values the linker stamped (make build, make
// release) and fills what is missing from the build information Go records
// in every binary: the module version of `go install …@v1.2.3`, the
// pseudo-version, revision and commit time of a `go build` in a git
// checkout.
func buildVersion() buildInfo {
	bi := buildInfo{Version: version, Commit: commit, Date: date, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		if bi.Version == "" {
			bi.Version = "dev"
		}
		return bi
	}
	if bi.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		bi.Version = info.Main.Version
	}
	if bi.Version == "" {
		bi.Version = "dev"
	}
	var vcsTime string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			if bi.Commit == "" {
				bi.Commit = s.Value
			}
		case "vcs.time":
			vcsTime = s.Value
		case "vcs.modified":
			bi.Modified = s.Value == "true"
		}
	}
	if bi.Date == "" && vcsTime != "" {
		if t, err := time.Parse(time.RFC3339, vcsTime); err == nil {
			bi.Date = t.UTC().Format(time.RFC3339)
		}
	}
	if strings.HasSuffix(bi.Version, "-dirty") || strings.HasSuffix(bi.Version, "+dirty") {
		bi.Modified = true
	}
	return bi
}

// String is the one-line form for logs: "v1.2.3 (abc1234, 2026-…, go1.26.8)".
func (b buildInfo) String() string {
	parts := []string{orUnknown(shortCommit(b.Commit))}
	if b.Date != "" {
		parts = append(parts, b.Date)
	}
	parts = append(parts, b.Go)
	return b.Version + " (" + strings.Join(parts, ", ") + ")"
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func (c *cli) version(ctx context.Context, args []string) error {
	fs := c.flagSet("version", "version [--json]", `Prints the version of this binary, the git commit and the commit's date it
was built from, and the Go toolchain and platform. A binary built by 'make
build' or 'make release' carries what the Makefile stamped; one built by 'go
install …@VERSION' or 'go build' says what Go recorded (a module version or
pseudo-version, the commit when built in a git checkout).`)
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := c.noArgs(fs, args); err != nil {
		return err
	}
	bi := buildVersion()
	if *asJSON {
		return c.printLine(bi)
	}
	rev := orUnknown(bi.Commit)
	if bi.Modified {
		rev += " (modified)"
	}
	fmt.Fprintf(c.stdout, "metanode %s\ncommit    %s\nbuilt     %s\ngo        %s %s\n", bi.Version, rev, orUnknown(bi.Date), bi.Go, bi.Platform)
	return nil
}
