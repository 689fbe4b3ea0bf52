package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// hostileSearch is one search built to cost the node as much as the
// limits let it.
type hostileSearch struct {
	name string
	req  api.SearchRequest
}

// hostileSearches are the costliest searches within the limits (docs/http.md
// "Search"), one per kind of cost: scans for short words, the longest
// trigram query, the most filter values on a field every record has,
// member lookups, the biggest page.
func hostileSearches() []hostileSearch {
	many := func(n int, f func(i int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	words := strings.Join(many(store.MaxSearchTokens, func(i int) string { return string(rune('a' + i%26)) }), " ")
	tokenLen := (store.MaxSearchQuery - store.MaxSearchTokens + 1) / store.MaxSearchTokens
	long := strings.Join(many(store.MaxSearchTokens, func(i int) string { return strings.Repeat("the"+string(rune('a'+i%26)), 8)[:tokenLen] }), " ")
	var titleFilters, memberFilters []api.SearchFilter
	per := store.MaxSearchValues / store.MaxSearchFilters
	for i := range store.MaxSearchFilters {
		titleFilters = append(titleFilters, api.SearchFilter{Property: []string{"title", "fileName", "plot", "originaltitle"}[i%4],
			Values: many(per, func(j int) string { return string(rune('a' + (i*per+j)%26)) })})
		memberFilters = append(memberFilters, api.SearchFilter{Property: "genres",
			Values: many(per, func(j int) string { return strings.Repeat("Kß", 60) + strconv.Itoa(i*per+j) })})
	}
	return []hostileSearch{
		{"short-word", api.SearchRequest{Query: "e", Limit: store.MaxSearchLimit}},
		{"32-short-words", api.SearchRequest{Query: words}},
		{"longest-query", api.SearchRequest{Query: long}},
		{"256-values-flat", api.SearchRequest{Filters: titleFilters}},
		{"256-values-members", api.SearchRequest{Filters: memberFilters}},
		{"biggest-page", api.SearchRequest{Limit: store.MaxSearchLimit, Offset: 20_000}},
		{"short-and-filter", api.SearchRequest{Query: "e", Filters: titleFilters[:4], Limit: store.MaxSearchLimit}},
		{"common-word-page", api.SearchRequest{Query: "the", Limit: store.MaxSearchLimit}},
	}
}

// procStatusBytes reads a field of /proc/self/status in bytes (VmRSS, VmHWM).
func procStatusBytes(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// BenchmarkAPI_SearchUnderAttack measures record reads (GET
// /api/meta/{cid}, one client, raw keep-alive) at the reference scale
// (1,000,000 claims, about 58,000 records) alone, then while 8 clients
// each loop one of hostileSearches, and the peak RSS of the process
// (server, store and clients) during the attack. Goal (issue 20): p99 <
// 5 ms and RSS < 300 MB. Run with -benchtime=1x; METANODE_BENCH_CLAIMS sets
// the scale, METANODE_BENCH_READS the reads per phase (default 20,000).
func BenchmarkAPI_SearchUnderAttack(b *testing.B) {
	n := benchN("METANODE_BENCH_CLAIMS", 1_000_000)
	reads := benchN("METANODE_BENCH_READS", 20_000)
	d := storetest.Fixture(b, n)
	st := loadedStore(b, d)
	<-st.SyncReady() // its load is not the attack's
	srv, hc := benchServer(b, st)
	searches := hostileSearches()
	bodies := make([][]byte, len(searches))
	for i, h := range searches {
		var err error
		if bodies[i], err = json.Marshal(h.req); err != nil {
			b.Fatal(err)
		}
	}
	post := func(body []byte) (int, error) {
		resp, err := hc.Post(srv.URL()+"/api/metadata/search", "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			msg, err := io.ReadAll(resp.Body)
			return resp.StatusCode, fmt.Errorf("%s (%v)", msg, err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, err
	}
	// Each search alone: its time and CPU.
	for i, h := range searches {
		t0, c0 := time.Now(), cpuTime()
		code, err := post(bodies[i])
		if code == 0 {
			b.Fatalf("%s: %v", h.name, err)
		}
		b.Logf("alone: %-20s %4d ms, CPU %4d ms, status %d", h.name, time.Since(t0).Milliseconds(), (cpuTime() - c0).Milliseconds(), code)
	}
	rc := &rawClient{addr: strings.TrimPrefix(srv.URL(), "http://")}
	defer rc.close()
	readPhase := func() []time.Duration {
		r := rand.New(rand.NewPCG(1, 9))
		lat := make([]time.Duration, 0, reads)
		for range reads {
			c := d.CIDs[r.IntN(len(d.CIDs))]
			t := time.Now()
			if err := rc.get(c); err != nil {
				b.Fatalf("GET %s: %v", c, err)
			}
			lat = append(lat, time.Since(t))
		}
		return lat
	}
	runtime.GC()
	quiet := readPhase()

	// The attack: 8 clients, each looping its search until the reads end.
	b.ResetTimer()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var codes sync.Map // status → *atomic.Int64
	count := func(code int) {
		v, _ := codes.LoadOrStore(code, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // a new VmHWM window
	for i := range 8 {
		body := bodies[i%len(bodies)]
		wg.Go(func() {
			for ctx.Err() == nil {
				code, err := post(body)
				if code == 0 {
					b.Error(err)
					return
				}
				count(code)
			}
		})
	}
	time.Sleep(200 * time.Millisecond) // every attacker has a request in flight
	if p := os.Getenv("METANODE_BENCH_TRACE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		if err := trace.Start(f); err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		defer trace.Stop()
	}
	c0, t0, sched0, gc0 := cpuTime(), time.Now(), schedLatencies(), gcCPU()
	attacked := readPhase()
	cpu, took, sched, gc := cpuTime()-c0, time.Since(t0), schedLatencies().sub(sched0), gcCPU().sub(gc0)
	hwm := procStatusBytes("VmHWM")
	stop()
	wg.Wait()
	b.StopTimer()
	var answered []string
	codes.Range(func(k, v any) bool {
		answered = append(answered, fmt.Sprintf("%d×%d", v.(*atomic.Int64).Load(), k))
		return true
	})
	qp50, qp99 := percentile(quiet, 0.5), percentile(quiet, 0.99)
	p50, p99, worst := percentile(attacked, 0.5), percentile(attacked, 0.99), percentile(attacked, 1)
	b.ReportMetric(float64(qp99.Microseconds()), "quiet-p99-µs")
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
	b.ReportMetric(float64(hwm)/(1<<20), "peak-RSS-MB")
	b.Logf("during the attack: goroutines runnable before running p50 %s p99 %s p99.9 %s; GC %d cycles, %.0f%% of the process's CPU; load average %s",
		sched.quantile(0.5), sched.quantile(0.99), sched.quantile(0.999), gc.cycles, 100*gc.gc/gc.total, loadAvg())
	b.Logf("%d records; reads alone p50 %s p99 %s; under 8 hostile searches p50 %s p99 %s max %s (%d reads in %s, process CPU %s); "+
		"searches answered %s; peak RSS during the attack %d MB; Go memory limit %s",
		len(d.CIDs), qp50, qp99, p50, p99, worst, len(attacked), took.Round(time.Millisecond), cpu.Round(time.Millisecond),
		strings.Join(answered, " "), hwm>>20, memLimit())
}

// schedHist is the runtime's histogram of the time goroutines spend
// runnable before they run (/sched/latencies:seconds).
type schedHist struct {
	counts  []uint64
	buckets []float64
}

func schedLatencies() schedHist {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	h := s[0].Value.Float64Histogram()
	return schedHist{counts: slices.Clone(h.Counts), buckets: h.Buckets}
}

func (h schedHist) sub(o schedHist) schedHist {
	out := schedHist{counts: slices.Clone(h.counts), buckets: h.buckets}
	for i := range out.counts {
		out.counts[i] -= o.counts[i]
	}
	return out
}

func (h schedHist) quantile(q float64) time.Duration {
	var total uint64
	for _, c := range h.counts {
		total += c
	}
	seen := uint64(0)
	for i, c := range h.counts {
		if seen += c; float64(seen) >= q*float64(total) {
			return time.Duration(h.buckets[i+1] * float64(time.Second))
		}
	}
	return 0
}

// gcStat is the GC's share of the CPU so far (runtime/metrics).
type gcStat struct {
	cycles    uint64
	gc, total float64 // CPU seconds
}

func gcCPU() gcStat {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/cpu/classes/total:cpu-seconds"}}
	metrics.Read(s)
	return gcStat{cycles: s[0].Value.Uint64(), gc: s[1].Value.Float64(), total: s[2].Value.Float64()}
}

func (g gcStat) sub(o gcStat) gcStat {
	return gcStat{cycles: g.cycles - o.cycles, gc: g.gc - o.gc, total: g.total - o.total}
}

// loadAvg is the machine's load average over 1, 5 and 15 minutes.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// memLimit is the Go runtime's soft memory limit as GOMEMLIMIT shows it.
func memLimit() string {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		return v
	}
	return "none"
}
