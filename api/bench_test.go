package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// benchN reads a scale from the environment, with a default.
func benchN(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// verifyLimitCPU is the machine's limit measured in the same run: claims
// verified per second on all cores (store.VerifyAllPlain: decred's
// ecdsa.Verify, keys parsed; the server's own verification is faster for
// frequent signers, see docs/benchmarks.md), and the
// CPU time of one verification.
func verifyLimitCPU(tb testing.TB, claims []store.Claim) (float64, time.Duration) {
	sample := claims[:min(len(claims), 20_000)]
	ids := make([]store.ID, len(sample))
	for i := range sample {
		ids[i] = sample[i].ID()
	}
	store.VerifyAllPlain(sample[:100], ids[:100]) // warm the key cache
	start, cpu0 := time.Now(), cpuTime()
	for _, err := range store.VerifyAllPlain(sample, ids) {
		if err != nil {
			tb.Fatal(err)
		}
	}
	return float64(len(sample)) / time.Since(start).Seconds(), (cpuTime() - cpu0) / time.Duration(len(sample))
}

func benchServer(b *testing.B, st *store.Store) (*api.Server, *http.Client) {
	srv := api.NewServer(api.Config{Addr: "127.0.0.1:0", Store: st, Node: &testNode{st: st}, Logger: storetest.Logger(b, 8)})
	if err := srv.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	hc := &http.Client{Transport: tr}
	b.Cleanup(func() {
		hc.CloseIdleConnections()
		if err := srv.Close(); err != nil {
			b.Error(err)
		}
	})
	return srv, hc
}

func percentile(d []time.Duration, p float64) time.Duration {
	slices.Sort(d)
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// BenchmarkAPI_PostClaims measures POST /api/claims end to end on loopback
// (JSON decoding, verification, durable commit, answer) as a ratio to the
// all-core verification rate of the same run. Bodies are encoded before
// the clock starts: the figure is the server's. Run with -benchtime=1x;
// METANODE_BENCH_API_CLAIMS sets the scale (default 100,000).
func BenchmarkAPI_PostClaims(b *testing.B) {
	n := benchN("METANODE_BENCH_API_CLAIMS", 100_000)
	// The first n claims of the reference dataset (one cached file for all
	// benchmarks): realistic keys and values from four signers.
	d := storetest.Fixture(b, benchN("METANODE_BENCH_CLAIMS", 1_000_000))
	claims := make([]store.Claim, 0, n)
	errEnough := errors.New("enough")
	err := d.Each(1000, func(cs []store.Claim) error {
		claims = append(claims, cs[:min(len(cs), n-len(claims))]...)
		if len(claims) == n {
			return errEnough
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		batch, clients int
	}{{1000, 1}, {1000, 4}, {10_000, 2}} {
		b.Run(fmt.Sprintf("batch=%d/clients=%d", tc.batch, tc.clients), func(b *testing.B) {
			st := storetest.Open(b, store.Config{Logger: storetest.Logger(b, 8)})
			srv, hc := benchServer(b, st)
			var bodies [][]byte
			for lo := 0; lo < len(claims); lo += tc.batch {
				js := make([]store.ClaimJSON, 0, tc.batch)
				for i := lo; i < min(lo+tc.batch, len(claims)); i++ {
					js = append(js, claims[i].ToJSON(false))
				}
				body, err := json.Marshal(api.ClaimsRequest{Claims: js})
				if err != nil {
					b.Fatal(err)
				}
				bodies = append(bodies, body)
			}
			next := make(chan []byte, len(bodies))
			for _, body := range bodies {
				next <- body
			}
			close(next)
			// The limit is measured right before and right after the run
			// (the machine is shared: its load moves).
			before, vcpu := verifyLimitCPU(b, claims)
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuTime()
			var wg sync.WaitGroup
			for range tc.clients {
				wg.Go(func() {
					for body := range next {
						resp, err := hc.Post(srv.URL()+"/api/claims", "application/json", bytes.NewReader(body))
						if err != nil {
							b.Error(err)
							return
						}
						var res api.ClaimsResponse
						err = json.NewDecoder(resp.Body).Decode(&res)
						resp.Body.Close()
						if err != nil || res.Rejected > 0 || resp.StatusCode != 200 {
							b.Errorf("status %d, %d rejected, %v", resp.StatusCode, res.Rejected, err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed, cpu := time.Since(start), cpuTime()-cpu0
			b.StopTimer()
			after, vcpu2 := verifyLimitCPU(b, claims)
			limit := (before + after) / 2
			rate := float64(len(claims)) / elapsed.Seconds()
			b.ReportMetric(rate, "claims/s")
			b.ReportMetric(limit, "verify/s")
			b.ReportMetric(rate/limit, "post/verify")
			// CPU per claim posted against CPU per verification: the ratio
			// the two cores would give if the process had them alone.
			perClaim := cpu / time.Duration(len(claims))
			b.ReportMetric(float64((vcpu+vcpu2)/2)/float64(perClaim), "cpu-verify/post")
		})
	}
}

// storeLayout changes when the store's files change in a way an upgrade
// at open must handle (group_edge and trust_policy: "2").
const storeLayout = "2"

// loadedStore returns an open store holding dataset d. Loading 1M claims
// takes minutes, so the loaded databases are cached beside the fixture
// (keyed by its checksum) and copied in by later runs; a cache that does
// not open, or holds the wrong count, is rebuilt.
func loadedStore(b *testing.B, d *storetest.Dataset) *store.Store {
	dir := b.TempDir()
	cfg := store.Config{TruthPath: filepath.Join(dir, "truth.db"), CachePath: filepath.Join(dir, "cache.db"),
		Trust: store.TrustOpen, Logger: storetest.Logger(b, 8)}
	cache := ""
	if base, err := os.UserCacheDir(); err == nil {
		// storeLayout names the store's file layout: a cache from an older
		// one would be upgraded (and its cache rebuilt) at every run.
		cache = filepath.Join(base, "metanode-bench", fmt.Sprintf("api-store-%s-%d-%s", storeLayout, d.N, d.Checksum()))
	}
	open := func() *store.Store {
		st := store.New(cfg)
		if err := st.Open(context.Background()); err != nil {
			b.Logf("open cached store: %v", err)
			return nil
		}
		stats, err := st.Stats(context.Background())
		if err != nil || stats.Claims+stats.Tombstones < int64(d.N)*9/10 {
			b.Logf("cached store holds %+v (%v): reloading", stats, err)
			st.Close()
			return nil
		}
		b.Cleanup(func() { st.Close() })
		return st
	}
	if cache != "" && copyDBs(cache, dir) == nil {
		if st := open(); st != nil {
			return st
		}
		for _, p := range []string{"truth.db", "cache.db"} {
			removeDB(filepath.Join(dir, p))
		}
	}
	st := store.New(cfg)
	if err := st.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	// Load without verifying: the reads are measured, not the ingest.
	t0 := time.Now()
	storetest.Load(b, st, d)
	b.Logf("loaded %d claims in %s", d.N, time.Since(t0).Round(time.Millisecond))
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	if cache != "" {
		if err := copyDBs(dir, cache); err != nil {
			b.Logf("cache the loaded store: %v", err)
		}
	}
	st = open()
	if st == nil {
		b.Fatal("reopen the loaded store")
	}
	return st
}

// copyDBs copies truth.db and cache.db (with any -wal file) from one
// directory to another, through a temporary name.
func copyDBs(from, to string) error {
	if err := os.MkdirAll(to, 0o700); err != nil {
		return err
	}
	for _, name := range []string{"truth.db", "cache.db", "truth.db-wal", "cache.db-wal"} {
		src, err := os.Open(filepath.Join(from, name))
		if os.IsNotExist(err) && strings.HasSuffix(name, "-wal") {
			continue
		}
		if err != nil {
			return err
		}
		tmp := filepath.Join(to, name+".tmp")
		dst, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
		if err == nil {
			_, err = io.Copy(dst, src)
			if cerr := dst.Close(); err == nil {
				err = cerr
			}
		}
		src.Close()
		if err == nil {
			err = os.Rename(tmp, filepath.Join(to, name))
		}
		if err != nil {
			os.Remove(tmp)
			return err
		}
	}
	return nil
}

func removeDB(p string) {
	for _, s := range []string{"", "-wal", "-shm"} {
		os.Remove(p + s)
	}
}

// BenchmarkAPI_GetMeta measures GET /api/meta/{cid} at the reference scale
// (1,000,000 claims, about 58,000 records) with 8 concurrent keep-alive
// clients on loopback, server and clients sharing the machine. Run with
// -benchtime=1x; METANODE_BENCH_CLAIMS sets the scale.
func BenchmarkAPI_GetMeta(b *testing.B) {
	n := benchN("METANODE_BENCH_CLAIMS", 1_000_000)
	d := storetest.Fixture(b, n)
	st := loadedStore(b, d)
	srv, hc := benchServer(b, st)
	const clients, perClient = 8, 25_000
	var wg sync.WaitGroup

	// The store's own read rate, same clients, no HTTP, measured right
	// before and right after (the machine is shared): the HTTP figure is
	// also given as a ratio to it.
	var directCPU time.Duration // over directRuns runs
	directRuns := 0
	directRate := func() float64 {
		t0, c0 := time.Now(), cpuTime()
		defer func() { directCPU += cpuTime() - c0; directRuns++ }()
		for w := range clients {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(w), 3))
				for range perClient / 4 {
					if _, err := st.Record(context.Background(), d.CIDs[r.IntN(len(d.CIDs))], ""); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return float64(clients*perClient/4) / time.Since(t0).Seconds()
	}
	before := directRate()

	// Two load generators: Go's net/http client (what a Go consumer
	// uses), and a minimal keep-alive HTTP/1.1 client like wrk's, which
	// leaves more of the shared cores to the server.
	for _, gen := range []struct {
		name string
		get  func(w int) func(cid string) error
	}{
		{"net-http", func(int) func(string) error {
			return func(c string) error {
				resp, err := hc.Get(srv.URL() + "/api/meta/" + c)
				if err != nil {
					return err
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode != 200 {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
				return err
			}
		}},
		{"raw", func(int) func(string) error {
			rc := &rawClient{addr: strings.TrimPrefix(srv.URL(), "http://")}
			b.Cleanup(rc.close)
			return rc.get
		}},
	} {
		b.Run(gen.name, func(b *testing.B) {
			lat := make([][]time.Duration, clients)
			gets := make([]func(string) error, clients)
			for w := range gets {
				gets[w] = gen.get(w)
			}
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuTime()
			for w := range clients {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(w), 7))
					lat[w] = make([]time.Duration, 0, perClient)
					for range perClient {
						c := d.CIDs[r.IntN(len(d.CIDs))]
						t := time.Now()
						if err := gets[w](c); err != nil {
							b.Errorf("GET %s: %v", c, err)
							return
						}
						lat[w] = append(lat[w], time.Since(t))
					}
				})
			}
			wg.Wait()
			elapsed, cpu := time.Since(start), cpuTime()-cpu0
			b.StopTimer()
			direct := (before + directRate()) / 2
			all := slices.Concat(lat...)
			perReq := cpu / time.Duration(len(all))
			perRead := directCPU / time.Duration(directRuns*clients*perClient/4)
			before = direct
			rate := float64(len(all)) / elapsed.Seconds()
			b.ReportMetric(rate, "req/s")
			b.ReportMetric(float64(perReq.Microseconds()), "cpu-µs/req")
			b.ReportMetric(float64(2*time.Second/perReq), "req/s-2cores")
			b.ReportMetric(float64(perRead.Microseconds()), "cpu-µs/read")
			b.ReportMetric(direct, "store-reads/s")
			b.ReportMetric(rate/direct, "http/store")
			b.ReportMetric(float64(percentile(all, 0.5).Microseconds()), "p50-µs")
			b.ReportMetric(float64(percentile(all, 0.99).Microseconds()), "p99-µs")
		})
	}
}

// rawClient is a minimal keep-alive HTTP/1.1 GET client, as load
// generators like wrk are: one connection, no pooling, no goroutines.
type rawClient struct {
	addr string
	conn net.Conn
	br   *bufio.Reader
	req  []byte
	body []byte
}

func (c *rawClient) close() {
	if c.conn != nil {
		c.conn.Close()
	}
}

func (c *rawClient) get(cid string) error {
	if c.conn == nil {
		conn, err := net.Dial("tcp", c.addr)
		if err != nil {
			return err
		}
		c.conn, c.br = conn, bufio.NewReaderSize(conn, 16<<10)
	}
	c.req = append(c.req[:0], "GET /api/meta/"...)
	c.req = append(c.req, cid...)
	c.req = append(c.req, " HTTP/1.1\r\nHost: "...)
	c.req = append(c.req, c.addr...)
	c.req = append(c.req, "\r\n\r\n"...)
	if _, err := c.conn.Write(c.req); err != nil {
		return err
	}
	status, n := "", -1
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if status == "" {
			status = string(line)
			continue
		}
		if len(line) <= 2 {
			break
		}
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && strings.EqualFold(string(k), "Content-Length") {
			n, _ = strconv.Atoi(strings.TrimSpace(string(v)))
		}
	}
	if n < 0 {
		return fmt.Errorf("no Content-Length after %q", status)
	}
	c.body = slices.Grow(c.body[:0], n)[:n]
	if _, err := io.ReadFull(c.br, c.body); err != nil {
		return err
	}
	if !strings.HasPrefix(status, "HTTP/1.1 200 ") {
		return fmt.Errorf("%s", strings.TrimSpace(status))
	}
	return nil
}
