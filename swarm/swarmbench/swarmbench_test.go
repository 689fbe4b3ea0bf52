package swarmbench_test

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"go.uber.org/goleak"

	"github.com/metanode/metanode/swarm/swarmbench"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs every part of the benchmark at a small size: the harness
// works end to end and reports each figure.
func TestRun(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // a fixture of this size only
	var out, prof bytes.Buffer
	err := swarmbench.Run(context.Background(), swarmbench.Options{
		Nodes: 3, Claims: 600, Diffs: 40, Rate: 40, Duration: time.Second, Dir: t.TempDir(),
		CPUProfile: &prof,
	}, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"verify limit", "cold catch-up: ", "warm reconcile", "1 difference",
		"scattered", "live propagation, 3 nodes", "copies", "unattributed CPU by goroutine root: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	checkAttribution(t, out.String())
	// The caller's profile is the one attributed: labelled samples of B.
	p, err := profile.Parse(&prof)
	if err != nil {
		t.Fatalf("the cpu profile written: %v", err)
	}
	if !slices.ContainsFunc(p.Sample, func(s *profile.Sample) bool { return slices.Equal(s.Label["node"], []string{"B"}) }) {
		t.Errorf("the cpu profile written has no sample labelled node=B among %d", len(p.Sample))
	}
}

var (
	bothRe  = regexp.MustCompile(`cold catch-up by CPU time: (\d+) µs per claim \(both nodes\)`)
	splitRe = regexp.MustCompile(`cold catch-up CPU by node \(profile of the window: (\d+) samples = [\d.]+ s; process CPU [\d.]+ s\): ` +
		`node B (\d+) µs per claim \((\d+) samples\), node A (\d+) µs per claim \((\d+) samples\), ` +
		`unattributed \(GC, runtime\) (\d+) µs per claim \((\d+) samples\)\n`)
	recvRe = regexp.MustCompile(`cold catch-up by CPU time, receiving node \(B \+ unattributed\): (\d+) µs per claim, a verification \d+ µs: ratio (\d+\.\d\d)\n`)
)

// checkAttribution reads the cold catch-up's split by node: the samples
// of A, B and no node are every sample of the profile (no other label),
// B did work, and the per-claim figures add up to the both-nodes figure
// and the receiver's, within the rounding of the printed integers.
func checkAttribution(t *testing.T, out string) {
	t.Helper()
	both, split, recv := bothRe.FindStringSubmatch(out), splitRe.FindStringSubmatch(out), recvRe.FindStringSubmatch(out)
	if both == nil || split == nil || recv == nil {
		t.Fatalf("report lacks the cold catch-up's CPU lines (both nodes %v, by node %v, receiving node %v)", both != nil, split != nil, recv != nil)
	}
	n := func(s string) int {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	total, bUS, bN, aUS, aN, noneUS, noneN := n(split[1]), n(split[2]), n(split[3]), n(split[4]), n(split[5]), n(split[6]), n(split[7])
	if aN+bN+noneN != total {
		t.Errorf("samples: A %d + B %d + unattributed %d = %d, want the profile's %d", aN, bN, noneN, aN+bN+noneN, total)
	}
	if bN <= 0 || bUS <= 0 {
		t.Errorf("node B holds %d samples, %d µs per claim: want more than none", bN, bUS)
	}
	if got, want := aUS+bUS+noneUS, n(both[1]); got < want-2 || got > want+2 {
		t.Errorf("A %d + B %d + unattributed %d = %d µs per claim, want the both-nodes %d (±2 for rounding)", aUS, bUS, noneUS, got, want)
	}
	if got, want := n(recv[1]), bUS+noneUS; got < want-1 || got > want+1 {
		t.Errorf("receiving node %d µs per claim, want B + unattributed = %d (±1 for rounding)", got, want)
	}
	if r, err := strconv.ParseFloat(recv[2], 64); err != nil || r <= 0 {
		t.Errorf("receiving node's ratio %q, want a positive number", recv[2])
	}
}
