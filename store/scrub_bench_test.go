package store_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// BenchmarkScrub measures the background signature check at the reference
// scale (METANODE_BENCH_CLAIMS, default 1,000,000 claims; run with
// -benchtime 1x): 100,000 claims at full speed (claims a second on its one
// goroutine, CPU per claim, against the plain verification limit of the
// same run), then the default pace (a pass in 12 h) in three one-minute
// windows: claims a second and the process's CPU as a share of the
// machine's cores. The store is idle but for the scrub, so the process's
// CPU is the scrub's (and the collector's).
func BenchmarkScrub(b *testing.B) {
	n := benchClaims()
	d := storetest.Fixture(b, n)
	limit, verifyCPU := verifyRate(b, d, false)
	tp, cp := loadScrubStore(b, d)
	b.Logf("load %s; plain verification limit %.0f/s (%.0f µs CPU each)", storetest.LoadAvg(), limit, float64(verifyCPU.Microseconds()))

	open := func(sc store.ScrubConfig) (*store.Store, *prometheus.Registry) {
		reg := prometheus.NewRegistry()
		s := store.New(store.Config{TruthPath: tp, CachePath: cp, Trust: store.TrustOpen, Registerer: reg,
			Logger: storetest.Logger(b, 8), Scrub: sc})
		if err := s.Open(ctx); err != nil {
			b.Fatal(err)
		}
		<-s.SyncReady()
		return s, reg
	}
	value := func(reg *prometheus.Registry, name string) float64 {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == name {
				m := mf.GetMetric()[0]
				if m.Counter != nil {
					return m.Counter.GetValue()
				}
				return m.Gauge.GetValue()
			}
		}
		return 0
	}

	// Full speed: a pass, or its first fullSpeed claims (the cost per claim
	// is what it shows; the machine is shared).
	const fullSpeed = 100_000
	s, reg := open(store.ScrubConfig{Period: time.Nanosecond, MaxRate: 1e9, Delay: time.Nanosecond})
	cpu0, t0 := cpuTime(), time.Now()
	for value(reg, "metanode_store_scrub_passes_total") < 1 && value(reg, "metanode_store_scrub_claims_total") < fullSpeed {
		time.Sleep(100 * time.Millisecond)
	}
	wall, cpu := time.Since(t0), cpuTime()-cpu0
	checked := value(reg, "metanode_store_scrub_claims_total")
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	rate := checked / wall.Seconds()
	perClaim := cpu / time.Duration(checked)
	b.Logf("full speed: %.0f claims in %s: %.0f claims/s on one goroutine (%.2f of the all-core plain limit), %.1f µs CPU a claim (%.2f of a plain verification)",
		checked, wall.Round(time.Millisecond), rate, rate/limit, float64(perClaim.Nanoseconds())/1e3, float64(perClaim)/float64(verifyCPU))
	b.ReportMetric(rate, "claims/s-fullspeed")
	b.ReportMetric(float64(perClaim.Nanoseconds())/1e3, "µs-cpu/claim")

	// The default pace.
	s, reg = open(store.ScrubConfig{Delay: time.Millisecond})
	defer s.Close()
	const window = time.Minute
	for i := range 3 {
		c0, n0, w0 := cpuTime(), value(reg, "metanode_store_scrub_claims_total"), time.Now()
		time.Sleep(window)
		w := time.Since(w0).Seconds()
		pace := (value(reg, "metanode_store_scrub_claims_total") - n0) / w
		share := (cpuTime() - c0).Seconds() / w / float64(runtime.NumCPU())
		b.Logf("default pace, window %d: %.1f claims/s (paced to %.1f: a pass over %d claims in %.1f h), CPU %.3f%% of %d cores; load %s",
			i+1, pace, value(reg, "metanode_store_scrub_rate"), n, float64(n)/value(reg, "metanode_store_scrub_rate")/3600,
			100*share, runtime.NumCPU(), storetest.LoadAvg())
		b.ReportMetric(100*share, fmt.Sprintf("cpu%%-w%d", i+1))
	}
}

// loadScrubStore puts a store of dataset d in a temporary directory: a copy
// of the API benchmark's cached one when it is there, else loaded (without
// verification: the scrub is measured, not the ingest).
func loadScrubStore(b *testing.B, d *storetest.Dataset) (truth, cache string) {
	dir := b.TempDir()
	truth, cache = filepath.Join(dir, "truth.db"), filepath.Join(dir, "cache.db")
	if base, err := os.UserCacheDir(); err == nil {
		from := filepath.Join(base, "metanode-bench", fmt.Sprintf("api-store-2-%d-%s", d.N, d.Checksum()))
		if _, err := os.Stat(filepath.Join(from, "cache.db")); err == nil {
			copyFile(b, filepath.Join(from, "truth.db"), truth)
			copyFile(b, filepath.Join(from, "cache.db"), cache)
			return truth, cache
		}
	}
	s := store.New(store.Config{TruthPath: truth, CachePath: cache, Trust: store.TrustOpen, Logger: storetest.Logger(b, 8),
		Scrub: store.ScrubConfig{Period: -1}})
	if err := s.Open(ctx); err != nil {
		b.Fatal(err)
	}
	storetest.Load(b, s, d)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	return truth, cache
}
