// Package swarmbench is the multi-node benchmark of the swarm (`metanode
// bench swarm`): it starts nodes with real stores and real libp2p hosts on
// loopback in one process and reports cold catch-up, warm reconciliation
// and live propagation, each as a figure and, where it applies, as a ratio
// to the signature-verification limit measured in the same run.
//
// Run owns every node it starts and closes them before returning; nothing
// outlives it. It writes results to w as they are measured. The cold
// catch-up is always CPU-profiled, its two nodes opened under the
// goroutine labels node=A and node=B, so its CPU is split by node: both
// run in this process, the sender's work is not the receiver's.
package swarmbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/refdata"
	"github.com/metanode/metanode/swarm"
)

// Options select and size the runs. Zero fields take the defaults.
type Options struct {
	Nodes    int           // nodes in the live propagation run; default 10
	Claims   int           // claims of the cold catch-up and the warm runs; default 1,000,000
	Diffs    int           // differences of the larger warm runs; default 10,000
	Rate     int           // live claims per second, all nodes together; default 100
	Duration time.Duration // live run length; default 10 s
	Dir      string        // data directory; default a temporary one, removed afterwards
	// Only runs a subset of "verify", "cold", "warm", "live" (warm needs
	// cold); default all.
	Only   []string
	Logger *slog.Logger // node logs; default discarded
	// CPUProfile, when set, receives a CPU profile (pprof) of the cold
	// catch-up window: from node B's start to its last commit.
	CPUProfile io.Writer
}

func (o *Options) defaults() {
	if o.Nodes <= 1 {
		o.Nodes = 10
	}
	if o.Claims <= 0 {
		o.Claims = 1_000_000
	}
	if o.Diffs <= 0 {
		o.Diffs = 10_000
	}
	if o.Rate <= 0 {
		o.Rate = 100
	}
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

func (o *Options) wants(run string) bool {
	return len(o.Only) == 0 || slices.Contains(o.Only, run) || (run == "cold" && slices.Contains(o.Only, "warm"))
}

// Run runs the benchmark and writes its report to w.
func Run(ctx context.Context, o Options, w io.Writer) (err error) {
	o.defaults()
	dir := o.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "metanode-bench-swarm-"); err != nil {
			return fmt.Errorf("bench swarm: %w", err)
		}
		defer os.RemoveAll(dir)
	}
	b := &bench{o: o, w: w, dir: dir}
	defer b.closeAll()
	b.printf("# swarm benchmark: %d cores, GOMAXPROCS %d, %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), time.Now().UTC().Format(time.RFC3339))
	if err := b.verifyLimit(ctx); err != nil {
		return err
	}
	if o.wants("cold") {
		if err := b.cold(ctx); err != nil {
			return err
		}
		if o.wants("warm") {
			if err := b.warm(ctx); err != nil {
				return err
			}
		}
		b.closeAll()
	}
	if o.wants("live") {
		if err := b.live(ctx); err != nil {
			return err
		}
	}
	return nil
}

type bench struct {
	o      Options
	w      io.Writer
	dir    string
	limit  float64 // verifications per second, all cores: the divisor of the ratios
	cpuPer float64 // CPU seconds per verification (0 when unknown)
	tabled float64 // the nodes' own verification rate (key tables), claims/s
	nodes  []*node
	a, b   *node // the cold and warm pair
	seq    int
	wireSz float64 // mean wire size of a fixture claim

	vclaims []store.Claim // the sample the limit is measured on
	vids    []store.ID
}

func (b *bench) printf(format string, args ...any) { fmt.Fprintf(b.w, format, args...) }

func (b *bench) closeAll() {
	for i := len(b.nodes) - 1; i >= 0; i-- {
		b.nodes[i].close()
	}
	b.nodes = nil
}

// note prints a progress line (a comment in the output).
func (b *bench) note(format string, args ...any) { b.printf("# "+format+"\n", args...) }

// verifyLimit loads the sample the machine's limit is measured on and
// measures it once: verifications per second on all cores
// (store.VerifyAllPlain over fixture claims: decred's ecdsa.Verify, keys
// parsed). It also measures the nodes' own verification (store.VerifyAll,
// with key tables for the fixture's frequent signers), which is faster.
func (b *bench) verifyLimit(ctx context.Context) error {
	n := min(b.o.Claims, 40_000)
	d, err := refdata.Load(b.o.Claims, b.note)
	if err != nil {
		return fmt.Errorf("reference data: %w", err)
	}
	claims := make([]store.Claim, 0, n)
	if err := d.Each(4096, func(cs []store.Claim) error {
		claims = append(claims, cs[:min(len(cs), n-len(claims))]...)
		if len(claims) == n {
			return errStop
		}
		return nil
	}); err != nil && !errors.Is(err, errStop) {
		return fmt.Errorf("bench swarm: read fixture: %w", err)
	}
	ids := make([]store.ID, len(claims))
	var bytes int
	for i := range claims {
		ids[i] = claims[i].ID()
		bytes += len(claims[i].Wire())
	}
	b.vclaims, b.vids = claims, ids
	b.wireSz = float64(bytes) / float64(len(claims))
	store.VerifyAllPlain(claims[:min(len(claims), 2000)], ids) // warm the key cache
	rate, err := b.measureLimit(ctx)
	if err != nil {
		return err
	}
	b.limit = rate
	b.printf("verify limit: %.0f claims/s on all cores (%d claims, mean wire size %.0f B; load %s)\n",
		rate, len(claims), b.wireSz, loadAvg())
	store.VerifyAll(claims, ids, nil) // builds the frequent signers' tables
	start := time.Now()
	store.VerifyAll(claims, ids, nil)
	b.tabled = float64(len(claims)) / time.Since(start).Seconds()
	b.printf("the nodes' verification (key tables): %.0f claims/s on all cores = %.2fx the limit\n", b.tabled, b.tabled/rate)
	return nil
}

// measureLimit returns the best of three all-core verification rates.
func (b *bench) measureLimit(ctx context.Context) (float64, error) {
	best := 0.0
	for range 3 {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		start, cpu := time.Now(), cpuTime()
		for _, err := range store.VerifyAllPlain(b.vclaims, b.vids) {
			if err != nil {
				return 0, fmt.Errorf("bench swarm: fixture claim does not verify: %w", err)
			}
		}
		best = max(best, float64(len(b.vclaims))/time.Since(start).Seconds())
		if used := (cpuTime() - cpu).Seconds(); used > 0 {
			per := used / float64(len(b.vclaims))
			if b.cpuPer == 0 || per < b.cpuPer {
				b.cpuPer = per
			}
		}
	}
	return best, nil
}

// relimit measures the limit again after a timed phase: the machine's load
// may have changed meanwhile (other work shares the cores). The ratio uses
// the mean of the measurements before and after the phase.
func (b *bench) relimit(ctx context.Context, before float64) (float64, error) {
	after, err := b.measureLimit(ctx)
	if err != nil {
		return 0, err
	}
	b.printf("verify limit after the run: %.0f claims/s (before %.0f; load %s)\n", after, before, loadAvg())
	return (before + after) / 2, nil
}

// loadAvg returns the 1, 5 and 15 minute load averages where the system
// tells them (Linux), to read figures taken on a shared machine.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

var errStop = errors.New("stop")

func ratio(rate, limit float64) string {
	if limit == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", rate/limit)
}

// cold loads the fixture into node A, starts an empty node B that has A
// as its bootstrap peer, and measures the time from B's start to holding
// every claim.
func (b *bench) cold(ctx context.Context) error {
	n := b.o.Claims
	d, err := refdata.Load(n, b.note)
	if err != nil {
		return fmt.Errorf("reference data: %w", err)
	}
	var a *node
	labelled(ctx, "A", func(ctx context.Context) { a, err = b.newNode(ctx, nil, nil) })
	if err != nil {
		return err
	}
	start := time.Now()
	if err := d.Each(8192, func(cs []store.Claim) error {
		_, err := a.st.Submit(ctx, cs, store.SubmitOptions{Origin: store.OriginLocal, Verified: true})
		return err
	}); err != nil {
		return fmt.Errorf("bench swarm: load node A: %w", err)
	}
	// A claim that a later one of the same signer, cid and key replaces is
	// not kept: the set to catch up is what A holds.
	held := a.count()
	b.printf("cold catch-up: node A loaded %d fixture claims (%d held) in %s (store ingest, pre-verified, not part of the figure)\n",
		n, held, time.Since(start).Round(time.Millisecond))
	// The window is always profiled: the profile's node labels split the
	// CPU between the nodes (attribution below).
	var prof bytes.Buffer
	profiling := true
	if err := pprof.StartCPUProfile(&prof); err != nil {
		if b.o.CPUProfile != nil {
			return fmt.Errorf("bench swarm: %w", err)
		}
		// Another profile runs (go test -cpuprofile): no attribution.
		b.note("cold catch-up: no CPU profile, so no split by node: %v", err)
		profiling = false
	}
	cpu0 := cpuTime()
	var bNode *node
	labelled(ctx, "B", func(ctx context.Context) { bNode, err = b.newNode(ctx, a.sw.Addrs()[:1], nil) })
	if err != nil {
		if profiling {
			pprof.StopCPUProfile()
		}
		return err
	}
	start = bNode.opened
	err = waitCount(ctx, bNode, held, 2*time.Hour)
	// Read before the profile stops: its encoding is not the catch-up's.
	el := time.Since(start)
	cpu := (cpuTime() - cpu0).Seconds()
	if profiling {
		pprof.StopCPUProfile() // writes the profile out before returning
	}
	if err != nil {
		return err
	}
	rate := float64(held) / el.Seconds()
	if b.o.CPUProfile != nil {
		// Copied after the window, not written through: a failing file
		// would have cut the profile short for the attribution too,
		// without a word.
		if _, err := b.o.CPUProfile.Write(prof.Bytes()); err != nil {
			return fmt.Errorf("bench swarm: write cpu profile: %w", err)
		}
	}
	// The session's figures are recorded once it ends, just after the last
	// commit (other, small sessions may end first).
	var c swarm.Counters
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if c = bNode.sw.Counters(); c.SyncBytesIn >= int64(float64(held)*b.wireSz*0.9) {
			break
		}
	}
	limit, err := b.relimit(ctx, b.limit)
	if err != nil {
		return err
	}
	b.printf("cold catch-up: %d claims in %s from node start = %.0f claims/s, %s of the verify limit (goal >= 0.7); %s of the nodes' own verification rate\n",
		held, el.Round(time.Millisecond), rate, ratio(rate, limit), ratio(rate, b.tabled))
	if cpu > 0 && b.cpuPer > 0 {
		// CPU time is what neighbours on a shared machine do not disturb:
		// the ratio of CPU per verification to CPU per claim caught up
		// (both nodes' work: A reads and sends, B verifies and stores).
		b.printf("cold catch-up by CPU time: %.0f µs per claim (both nodes), a verification %.0f µs: ratio %.2f\n",
			cpu/float64(held)*1e6, b.cpuPer*1e6, b.cpuPer/(cpu/float64(held)))
	}
	if profiling {
		if err := b.attributeCold(prof.Bytes(), cpu, held); err != nil {
			return err
		}
	}
	b.printf("cold catch-up: %.0f B received per claim (%.2fx the mean wire size)\n",
		float64(c.SyncBytesIn)/float64(held), float64(c.SyncBytesIn)/float64(held)/b.wireSz)
	b.a, b.b = a, bNode
	return nil
}

// warm runs single sessions between the two 1M-claim nodes of cold: one
// difference, then Diffs differences written while a node was offline
// (the newest claims), then Diffs differences scattered over the whole
// history.
func (b *bench) warm(ctx context.Context) error {
	// Fresh swarms on the same stores that start no session by themselves:
	// each figure is one session, SyncWith's.
	a, bn := b.a, b.b
	for _, n := range []*node{a, bn} {
		if err := b.reopen(ctx, n); err != nil {
			return err
		}
	}
	if err := bn.sw.Connect(ctx, a.sw.Addrs()[0]); err != nil {
		return fmt.Errorf("bench swarm: connect: %w", err)
	}
	signer, err := store.GenerateSigner()
	if err != nil {
		return err
	}
	newest := uint64(refdata.FixtureBase) + uint64(b.o.Claims) + 1000
	runs := []struct {
		name    string
		claims  []store.Claim
		scatter bool
	}{
		{"1 difference", b.diffClaims(signer, 1, newest, false), false},
		{fmt.Sprintf("%d differences, newest (a node was offline)", b.o.Diffs), b.diffClaims(signer, b.o.Diffs, newest+10, false), false},
		{fmt.Sprintf("%d differences, scattered over the history", b.o.Diffs), b.diffClaims(signer, b.o.Diffs, 0, true), true},
	}
	for _, r := range runs {
		half := (len(r.claims) + 1) / 2
		want := a.count() + len(r.claims)
		if _, err := a.st.Submit(ctx, r.claims[:half], store.SubmitOptions{Verified: true}); err != nil {
			return err
		}
		if _, err := bn.st.Submit(ctx, r.claims[half:], store.SubmitOptions{Verified: true}); err != nil {
			return err
		}
		st, err := bn.sw.SyncWith(ctx, a.id)
		if err != nil {
			return fmt.Errorf("bench swarm: warm session: %w", err)
		}
		if err := waitCount(ctx, a, want, time.Minute); err != nil {
			return err
		}
		if err := waitCount(ctx, bn, want, time.Minute); err != nil {
			return err
		}
		overhead := st.BytesSent + st.BytesRecvd - st.ClaimBytes
		b.printf("warm reconcile %d vs %d, %s: %d round trips, %d B sync overhead (%d B both ways in all), %.1f B per differing claim, %s\n",
			b.o.Claims, b.o.Claims, r.name, st.RoundTrips, overhead, st.BytesSent+st.BytesRecvd,
			float64(overhead)/float64(len(r.claims)), st.Duration.Round(time.Microsecond))
	}
	return nil
}

// diffClaims signs n claims on fresh cids: from ts on, or (scatter) at
// timestamps spread over the fixture's history.
func (b *bench) diffClaims(s *store.Signer, n int, ts uint64, scatter bool) []store.Claim {
	b.seq += n
	base := b.seq
	span := uint64(b.o.Claims)
	return refdata.Claims(n, func(i int) (*store.Signer, store.Claim) {
		t := ts + uint64(i)
		if scatter {
			t = uint64(refdata.FixtureBase) + (uint64(i)*2654435761)%span
		}
		return s, store.Claim{CID: refdata.CID(10_000_000 + base + i), Key: "title", Kind: store.KindText,
			Value: fmt.Appendf(nil, "difference %d", base+i), TS: t}
	})
}
