package swarmbench

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// nodeLabel is the pprof goroutine label that names the benchmark node a
// goroutine works for ("A" sends, "B" catches up). Goroutines inherit it
// from the goroutine that started them, so everything a node's Open starts
// (the store's writer, libp2p's listeners, connections and stream
// handlers, the swarm's loops and the sessions they start) carries it.
const nodeLabel = "node"

// labelled runs f with the goroutine label node=name.
func labelled(ctx context.Context, name string, f func(context.Context)) {
	pprof.Do(ctx, pprof.Labels(nodeLabel, name), f)
}

// errNoSamples is returned for a profile that holds no CPU samples to
// split (a window too short for one 10 ms tick).
var errNoSamples = errors.New("profile holds no CPU samples")

// cpuShares is a CPU profile's samples split by the node label.
type cpuShares struct {
	total, a, b, none, other int64 // samples (10 ms ticks at the default rate)
	period                   int64 // CPU nanoseconds per sample
	// roots is the unattributed CPU by the function its goroutine started
	// in (or the runtime's pseudo-frame), largest first.
	roots []rootShare
}

type rootShare struct {
	fn      string
	samples int64
}

// attribute parses a CPU profile and sums its samples by the node label.
// Samples with no label are the runtime's (GC workers, the scheduler,
// timers, sysmon) or of goroutines that package-level singletons started
// outside any node; other counts a label value that is neither A nor B,
// which this benchmark never sets.
func attribute(data []byte) (cpuShares, error) {
	p, err := profile.Parse(bytes.NewReader(data))
	if err != nil {
		return cpuShares{}, fmt.Errorf("parse cpu profile: %w", err)
	}
	idx := slices.IndexFunc(p.SampleType, func(t *profile.ValueType) bool { return t.Type == "samples" })
	if idx < 0 {
		return cpuShares{}, fmt.Errorf("parse cpu profile: no \"samples\" value among %d sample types", len(p.SampleType))
	}
	s := cpuShares{period: p.Period}
	roots := map[string]int64{}
	for _, smp := range p.Sample {
		if idx >= len(smp.Value) {
			return cpuShares{}, fmt.Errorf("parse cpu profile: a sample has %d values, want more than %d", len(smp.Value), idx)
		}
		v := smp.Value[idx]
		if v < 0 {
			return cpuShares{}, fmt.Errorf("parse cpu profile: a sample counts %d ticks", v)
		}
		s.total += v
		switch l := smp.Label[nodeLabel]; {
		case len(l) == 0:
			s.none += v
			roots[rootFunc(smp)] += v
		case len(l) == 1 && l[0] == "A":
			s.a += v
		case len(l) == 1 && l[0] == "B":
			s.b += v
		default:
			s.other += v
		}
	}
	if s.total <= 0 {
		return cpuShares{}, errNoSamples
	}
	for fn, n := range roots {
		s.roots = append(s.roots, rootShare{fn, n})
	}
	slices.SortFunc(s.roots, func(x, y rootShare) int {
		return cmp.Or(cmp.Compare(y.samples, x.samples), strings.Compare(x.fn, y.fn))
	})
	return s, nil
}

// rootFunc is the outermost function of a sample's stack: the function a
// goroutine was started with, or a pseudo-frame such as runtime._GC when
// the runtime could not walk the stack.
func rootFunc(smp *profile.Sample) string {
	// Locations run from the leaf to the root; within a location the last
	// line is the caller the others were inlined into.
	for i := len(smp.Location) - 1; i >= 0; i-- {
		lines := smp.Location[i].Line
		for j := len(lines) - 1; j >= 0; j-- {
			if f := lines[j].Function; f != nil && f.Name != "runtime.goexit" {
				return f.Name
			}
		}
	}
	return "unknown"
}

// topRoots formats the largest unattributed roots as shares of the
// unattributed samples.
func (s cpuShares) topRoots(n int) string {
	if s.none == 0 {
		return "none"
	}
	parts := make([]string, 0, n+1)
	var shown int64
	for _, r := range s.roots[:min(n, len(s.roots))] {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", r.fn, pct(r.samples, s.none)))
		shown += r.samples
	}
	if rest := s.none - shown; rest > 0 {
		parts = append(parts, fmt.Sprintf("other %.0f%%", pct(rest, s.none)))
	}
	return strings.Join(parts, ", ")
}

func pct(part, whole int64) float64 {
	if whole == 0 {
		return 0
	}
	return float64(part) / float64(whole) * 100
}

// attributeCold prints the cold catch-up's CPU split by node. Both nodes
// share this process and its cores, so the both-nodes figure charges the
// receiver for the sender's range reads and framing; in a deployment the
// sender is another home's machine. The receiving node's ratio leaves
// node A's share out and charges all unattributed CPU (GC, scheduler,
// the harness polling B's count) to the receiver: conservative, since part
// of it is A's. The both-nodes line stays, comparable with earlier runs.
func (b *bench) attributeCold(data []byte, cpu float64, held int) error {
	s, err := attribute(data)
	if errors.Is(err, errNoSamples) {
		b.note("cold catch-up: the profile holds no samples, so no split by node")
		return nil
	}
	if err != nil {
		return fmt.Errorf("bench swarm: %w", err)
	}
	// The profile gives the shares, the process's CPU time of the same
	// window the amount (as in the both-nodes figure): a profile loses
	// ticks whose signals coalesce.
	profiled := float64(s.total*s.period) / 1e9
	amount := cpu
	if amount <= 0 {
		amount = profiled
	}
	per := func(n int64) float64 { return amount * float64(n) / float64(s.total) / float64(held) * 1e6 }
	other := ""
	if s.other > 0 {
		other = fmt.Sprintf(", other labels %.0f µs per claim (%d samples)", per(s.other), s.other)
	}
	b.printf("cold catch-up CPU by node (profile of the window: %d samples = %.1f s; process CPU %.1f s): node B %.0f µs per claim (%d samples), node A %.0f µs per claim (%d samples), unattributed (GC, runtime) %.0f µs per claim (%d samples)%s\n",
		s.total, profiled, cpu, per(s.b), s.b, per(s.a), s.a, per(s.none), s.none, other)
	b.printf("cold catch-up: unattributed CPU by goroutine root: %s\n", s.topRoots(4))
	recv := per(s.b + s.none)
	r := "n/a"
	if b.cpuPer > 0 && recv > 0 {
		r = fmt.Sprintf("%.2f", b.cpuPer*1e6/recv)
	}
	b.printf("cold catch-up by CPU time, receiving node (B + unattributed): %.0f µs per claim, a verification %.0f µs: ratio %s\n",
		recv, b.cpuPer*1e6, r)
	return nil
}
