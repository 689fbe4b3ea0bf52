package store_test

import (
	"bufio"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

const crashEnv = "METANODE_STORE_CRASH_DIR"

// crashClaim is claim i of round r of the crash workload: three signers,
// forty cids, links now and then, retractions, and rows replaced across
// rounds.
func crashClaim(r, i int) (*store.Signer, store.Claim) {
	c := store.Claim{CID: storetest.CID(i % 40), Key: []string{"title", "year", "plot", "genres/Drama", "rating"}[i%5],
		Kind: store.KindText, Value: fmt.Appendf(nil, "r%d-%d", r, i%9), TS: uint64(1_000_000 + r*100_000 + i)}
	switch {
	case i%17 == 0:
		c.Key, c.Value = "cids/"+storetest.CID((i+1)%40+40), []byte("true")
	case i%13 == 0:
		c.Kind, c.Value = store.KindRetraction, nil
	}
	return storetest.Signer(i % 3), c
}

// TestCrashChild is the subprocess of TestCrash: it ingests until killed
// and prints every acknowledged claim.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("run by TestCrash")
	}
	round, _ := strconv.Atoi(os.Getenv(crashEnv + "_ROUND"))
	s := store.New(store.Config{TruthPath: filepath.Join(dir, "truth.db"), CachePath: filepath.Join(dir, "cache.db"),
		Trust: store.TrustOpen, Now: testNow, MaxBatch: 64,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err := s.Open(ctx); err != nil {
		fmt.Printf("fatal open: %v\n", err)
		os.Exit(1)
	}
	var mu sync.Mutex
	deadline := time.Now().Add(2 * time.Minute) // bounded even if nobody kills us
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			for b := 0; time.Now().Before(deadline); b++ {
				lo := (b*3 + w) * 20
				claims := storetest.Claims(20, func(i int) (*store.Signer, store.Claim) { return crashClaim(round, lo+i) })
				// One worker's claims come "from peers": their batches
				// commit without fsync, and a kill must not lose them either.
				opt := store.SubmitOptions{}
				if w == 0 {
					opt.Origin = store.OriginPeer
				}
				res, err := s.Submit(ctx, claims, opt)
				if err != nil {
					fmt.Printf("fatal submit: %v\n", err)
					os.Exit(1)
				}
				if b%5 == 0 {
					p := fmt.Sprintf("/files/%d-%d", round, lo)
					if _, err := s.ApplyFiles(ctx, []store.FileUpdate{{Op: store.FileAdd, File: store.LocalFile{Path: p, CID: storetest.CID(lo % 40), Size: int64(lo)}}}); err != nil {
						fmt.Printf("fatal files: %v\n", err)
						os.Exit(1)
					}
				}
				var sb strings.Builder
				for i, r := range res {
					if r.Outcome == store.Accepted || r.Outcome == store.Unchanged {
						c := claims[i]
						fmt.Fprintf(&sb, "ack %s %s %s %d %s\n", c.UID, c.CID, c.Key, c.TS, r.ID)
					}
				}
				mu.Lock()
				os.Stdout.WriteString(sb.String()) // unbuffered: the parent sees it at once
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	s.Close()
}

// TestCrash: a process killed with SIGKILL in the middle of ingesting
// loses no claim it acknowledged, and after a restart its cache equals a
// full rebuild from truth.
func TestCrash(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		t.Skip("in the child")
	}
	dir := t.TempDir()
	tp, cp := filepath.Join(dir, "truth.db"), filepath.Join(dir, "cache.db")
	type ack struct {
		ts uint64
		id string
	}
	acked := map[string]ack{} // uid cid key → newest acknowledged
	rnd := rand.New(rand.NewPCG(5, 6))
	for round := range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir, fmt.Sprintf("%s_ROUND=%d", crashEnv, round))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAt := 150 + rnd.IntN(250)
		sc := bufio.NewScanner(out)
		n := 0
		killed := false
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) > 0 && f[0] == "fatal" {
				t.Fatalf("child: %s", sc.Text())
			}
			if len(f) != 6 || f[0] != "ack" {
				continue
			}
			ts, _ := strconv.ParseUint(f[4], 10, 64)
			k := f[1] + " " + f[2] + " " + f[3]
			if a, ok := acked[k]; !ok || ts > a.ts || ts == a.ts && f[5] > a.id {
				acked[k] = ack{ts, f[5]}
			}
			if n++; n == killAt {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		}
		_ = cmd.Wait()
		if !killed {
			t.Fatalf("round %d: the child ended after %d acks without being killed", round, n)
		}

		// Restart: every acknowledged claim is there (or a newer row), and
		// the recovered cache equals a full rebuild.
		logs := &logSink{}
		s := reopen(t, store.Config{TruthPath: tp, CachePath: cp, Logger: slog.New(logs)})
		rows := map[string]ack{}
		all, err := s.ClaimsInRange(ctx, store.MinSyncItem, store.MaxSyncItem, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range all {
			rows[c.UID+" "+c.CID+" "+c.Key] = ack{c.TS, c.ID().String()}
		}
		for k, a := range acked {
			r, ok := rows[k]
			if !ok || r.ts < a.ts || r.ts == a.ts && r.id < a.id {
				t.Fatalf("round %d: acknowledged claim %s (ts %d) lost: stored %+v", round, k, a.ts, r)
			}
		}
		st, _ := s.Stats(ctx)
		if st.AppliedSeq != st.LastSeq {
			t.Fatalf("applied %d of %d after restart", st.AppliedSeq, st.LastSeq)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		diffMaps(t, dumpCache(t, cp), rebuilt(t, tp, cp))
		recovery := "none needed"
		switch {
		case logs.has("rebuilding"):
			recovery = "full rebuild"
		case logs.has("cache caught up"):
			recovery = "catch-up"
		}
		t.Logf("round %d: killed after %d acks; %d rows checked; recovery: %s", round, n, len(acked), recovery)
	}
}
