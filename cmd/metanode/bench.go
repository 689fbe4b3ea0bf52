package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm/swarmbench"
)

func (c *cli) bench(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("bench", "want a subcommand: verify or swarm")
	}
	switch args[0] {
	case "verify":
		return inSub("bench verify", c.benchVerify(ctx, args[1:]))
	case "swarm":
		return inSub("bench swarm", c.benchSwarm(ctx, args[1:]))
	case "-h", "-help", "--help", "help":
		fmt.Fprint(c.stdout, `Usage: metanode bench verify|swarm [flags]

  verify  this machine's signature verification rate on all cores: the limit
          that throughput figures are divided by
  swarm   start nodes on loopback and measure catch-up, reconciliation and
          live propagation
`)
		return errHelp
	}
	return usagef("bench", "unknown subcommand %q: want verify or swarm", args[0])
}

func (c *cli) benchVerify(ctx context.Context, args []string) error {
	fl := c.flagSet("bench verify", "bench verify [--claims N] [--duration D]",
		"Measures claim signature verifications per second on all cores: plain ones (decred's\n"+
			"ecdsa.Verify on parsed keys, the limit other benchmarks divide by), then the node's own,\n"+
			"which use a per-key table for a signer seen often (store.VerifyAll).")
	n := fl.Int("claims", 4096, "claims signed for the run (verified repeatedly)")
	d := fl.Duration("duration", 3*time.Second, "how long to verify")
	if err := c.noArgs(fl, args); err != nil {
		return err
	}
	if *n < 1 || *d <= 0 {
		return usagef("bench verify", "--claims and --duration must be positive")
	}
	claims, ids, err := verifyClaims(*n)
	if err != nil {
		return err
	}
	plain, err := measureVerify(ctx, claims, ids, *d, plainVerify)
	if err != nil {
		return err
	}
	store.VerifyAll(claims, ids, nil) // builds the signers' tables
	tabled, err := measureVerify(ctx, claims, ids, *d, store.VerifyAll)
	if err != nil {
		return err
	}
	if plain.contended() || tabled.contended() {
		fmt.Fprintf(c.stderr, "metanode bench verify: warning: this process got %.2f of %d cores (other load on the machine?): the claims/s figures understate this machine; claims per CPU-second does not\n",
			min(plain.CPUSeconds/plain.Seconds, tabled.CPUSeconds/tabled.Seconds), plain.Cores)
	}
	if err := plain.print(c.stdout, "verify"); err != nil {
		return err
	}
	if err := tabled.print(c.stdout, "verify with key tables"); err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.stdout, "key tables: %.2fx the plain rate (the limit is the plain rate)\n", tabled.PerSec/plain.PerSec)
	return err
}

func plainVerify(claims []store.Claim, ids []store.ID, _ []bool) []error {
	return store.VerifyAllPlain(claims, ids)
}

type verifyResult struct {
	Cores    int     `json:"cores"`
	Verified int     `json:"verified"`
	Seconds  float64 `json:"seconds"`
	PerSec   float64 `json:"claimsPerSecond"`
	PerCore  float64 `json:"claimsPerSecondPerCore"`
	// CPUSeconds is the process's CPU time during the run (0 where it
	// cannot be read); PerCPUSecond = Verified / CPUSeconds does not depend
	// on how much of the machine other load left to this process.
	CPUSeconds   float64 `json:"cpuSeconds,omitempty"`
	PerCPUSecond float64 `json:"claimsPerCPUSecond,omitempty"`
}

func (r verifyResult) print(w io.Writer, what string) error {
	_, err := fmt.Fprintf(w, "%s: %.0f claims/s on %d cores (%.0f per core; %d verified in %.2fs)",
		what, r.PerSec, r.Cores, r.PerCore, r.Verified, r.Seconds)
	if err == nil && r.CPUSeconds > 0 {
		_, err = fmt.Fprintf(w, "; %.0f claims per CPU-second (%.2f cores busy)", r.PerCPUSecond, r.CPUSeconds/r.Seconds)
	}
	if err == nil {
		_, err = fmt.Fprintln(w)
	}
	return err
}

// contended reports a run that got well under its cores' worth of CPU
// time: other load shared the machine, so the per-second rate is not its
// limit.
func (r verifyResult) contended() bool {
	return r.CPUSeconds > 0 && r.Seconds > 0 && r.CPUSeconds/r.Seconds < 0.75*float64(r.Cores)
}

// verifyClaims signs n claims of 8 signers in parallel.
func verifyClaims(n int) ([]store.Claim, []store.ID, error) {
	claims := make([]store.Claim, n)
	signers := make([]*store.Signer, 8)
	for i := range signers {
		s, err := store.GenerateSigner()
		if err != nil {
			return nil, nil, err
		}
		signers[i] = s
	}
	cores := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range cores {
		wg.Go(func() {
			for i := w; i < n; i += cores {
				claims[i] = signers[i%len(signers)].Text("bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "title", fmt.Sprint("t", i), uint64(1_700_000_000_000+i))
			}
		})
	}
	wg.Wait()
	ids := make([]store.ID, n)
	for i := range claims {
		ids[i] = claims[i].ID()
	}
	return claims, ids, nil
}

// measureVerify verifies claims with verify (all cores) in rounds until d
// has passed or ctx is done.
func measureVerify(ctx context.Context, claims []store.Claim, ids []store.ID, d time.Duration, verify func([]store.Claim, []store.ID, []bool) []error) (verifyResult, error) {
	n := len(claims)
	cores := runtime.GOMAXPROCS(0)
	start := time.Now()
	cpu0, cpuOK := processCPU()
	done := 0
	for time.Since(start) < d && ctx.Err() == nil {
		for i, err := range verify(claims, ids, nil) {
			if err != nil {
				return verifyResult{}, fmt.Errorf("claim %d: %w", i, err)
			}
		}
		done += n
	}
	if ctx.Err() != nil {
		return verifyResult{}, ctx.Err()
	}
	secs := time.Since(start).Seconds()
	r := verifyResult{Cores: cores, Verified: done, Seconds: secs, PerSec: float64(done) / secs, PerCore: float64(done) / secs / float64(cores)}
	if cpu1, ok := processCPU(); ok && cpuOK && cpu1 > cpu0 {
		r.CPUSeconds = (cpu1 - cpu0).Seconds()
		r.PerCPUSecond = float64(done) / r.CPUSeconds
	}
	return r, nil
}

func (c *cli) benchSwarm(ctx context.Context, args []string) error {
	fl := c.flagSet("bench swarm", "bench swarm [flags]", `Starts nodes with real stores and libp2p hosts on loopback (in this process)
and measures cold catch-up, warm reconciliation and live propagation, each as
a figure and, where it applies, as a ratio to this machine's verification
limit measured in the same run. The 1,000,000-claim dataset is signed once
and cached under the user cache directory.`)
	var o swarmbench.Options
	fl.IntVar(&o.Nodes, "nodes", 10, "nodes in the live propagation run")
	fl.IntVar(&o.Claims, "claims", 1_000_000, "claims of the cold catch-up and warm runs")
	fl.IntVar(&o.Diffs, "diffs", 10_000, "differences of the larger warm run")
	fl.IntVar(&o.Rate, "rate", 100, "live claims per second, all nodes together")
	fl.DurationVar(&o.Duration, "duration", 10*time.Second, "length of the live run")
	fl.StringVar(&o.Dir, "dir", "", "data directory (default a temporary one, removed afterwards)")
	only := fl.String("only", "", "comma-separated subset of verify, cold, warm, live (default all)")
	cpuProfile := fl.String("cpuprofile", "", "write a CPU profile of the cold catch-up (both nodes, from B's start to its last commit) to this file")
	if err := c.noArgs(fl, args); err != nil {
		return err
	}
	if o.Nodes < 2 || o.Claims < 1 || o.Diffs < 1 || o.Rate < 1 || o.Duration <= 0 {
		return usagef("bench swarm", "--nodes must be at least 2 and the other sizes positive")
	}
	for part := range strings.SplitSeq(*only, ",") {
		switch part = strings.TrimSpace(part); part {
		case "":
		case "verify", "cold", "warm", "live":
			o.Only = append(o.Only, part)
		default:
			return usagef("bench swarm", "--only takes verify, cold, warm or live, not %q", part)
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("bench swarm: %w", err)
		}
		defer f.Close()
		o.CPUProfile = f
	}
	return swarmbench.Run(ctx, o, c.stdout)
}
