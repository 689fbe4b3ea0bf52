package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/store"
)

// BenchmarkImport_Library imports a library of seed 003's size (58,000
// records of 17 fields, about a million field values; each record with two
// content ids) from a real redis-server in the flat layout (seed 001) into
// a stopped node's data directory, and reports the rate in claims per
// second and as a ratio to the node's local-write rate measured in the same
// run (as BenchmarkNode_LocalWrites measures it: 20,000 signed claims of 4
// signers posted to a running node in batches of 1,000), before and after
// the import (their mean is the divisor: the machine is shared). Both are
// also given per CPU-second of this process, which other load does not
// change (redis-server's own CPU is not counted). With
// METANODE_BENCH_IMPORT_API=1 it also imports through a running node's API.
// METANODE_BENCH_IMPORT_RECORDS and METANODE_BENCH_IMPORT_LAYOUT (flat or
// hash) change the library. Run with -benchtime 1x.
func BenchmarkImport_Library(b *testing.B) {
	records := envInt(b, "METANODE_BENCH_IMPORT_RECORDS", 58_000)
	const fields = 17
	layout := os.Getenv("METANODE_BENCH_IMPORT_LAYOUT")
	if layout == "" {
		layout = layoutFlat
	}
	url, rdb := startRedis(b)
	start := time.Now()
	if layout == layoutHash {
		loadBigHash(b, rdb, records, fields)
	} else {
		loadBigFlat(b, rdb, records, fields)
	}
	b.Logf("loaded %d records (%s layout) into redis in %s", records, layout, time.Since(start).Round(time.Millisecond))
	before := localWriteRate(b)
	dir := b.TempDir()
	b.ResetTimer()
	var imports []rates
	for i := 0; i < b.N; i++ {
		imports = append(imports, benchImport(b, "offline", "--from-redis", url, "--data", filepath.Join(dir, fmt.Sprint("offline", i))))
		if os.Getenv("METANODE_BENCH_IMPORT_API") == "1" {
			b.StopTimer()
			data := filepath.Join(dir, fmt.Sprint("api", i))
			n0 := benchNode(b, data)
			b.StartTimer()
			imports = append(imports, benchImport(b, "api", "--from-redis", url, "--data", data, "--api", n0.APIURL()))
		}
	}
	b.StopTimer()
	after := localWriteRate(b)
	local := rates{wall: (before.wall + after.wall) / 2, cpu: (before.cpu + after.cpu) / 2}
	b.Logf("local writes: %.0f claims/s before, %.0f after (%.0f and %.0f per CPU-second)", before.wall, after.wall, before.cpu, after.cpu)
	for _, r := range imports {
		b.Logf("%s import: %d claims at %.0f claims/s = %.2f of the local-write rate (%.0f per CPU-second = %.2f)",
			r.name, r.n, r.wall, r.wall/local.wall, r.cpu, r.cpu/local.cpu)
		prefix := ""
		if r.name != "offline" {
			prefix = r.name + "-"
		}
		b.ReportMetric(r.wall, prefix+"claims/s")
		b.ReportMetric(r.wall/local.wall, prefix+"ratio-to-local-writes")
		b.ReportMetric(r.cpu/local.cpu, prefix+"cpu-ratio-to-local-writes")
	}
	b.ReportMetric(local.wall, "local-writes/s")
}

// rates is a throughput by wall clock and per CPU-second of this process.
type rates struct {
	name      string
	n         int64
	wall, cpu float64
}

// measure runs f, which handles n claims, and times it.
func measure(name string, f func() int64) rates {
	start := time.Now()
	cpu0, _ := processCPU()
	n := f()
	cpu1, ok := processCPU()
	r := rates{name: name, n: n, wall: float64(n) / time.Since(start).Seconds()}
	if ok && cpu1 > cpu0 {
		r.cpu = float64(n) / (cpu1 - cpu0).Seconds()
	}
	return r
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// benchImport runs metanode import in process, timed from the command's
// start to its end, and returns its rates (claims stored).
func benchImport(b *testing.B, name string, args ...string) rates {
	b.Helper()
	return measure(name, func() int64 {
		var out, errb bytes.Buffer
		c := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: envMap(map[string]string{"HOME": b.TempDir()})}
		if code := c.run(context.Background(), append([]string{"import"}, args...)); code != 0 {
			b.Fatalf("import: exit %d\n%s", code, errb.String())
		}
		var rep importReport
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			b.Fatal(err)
		}
		n := rep.Stored.Accepted + rep.Stored.Unchanged
		if rep.Stored.Rejected != 0 || n == 0 {
			b.Fatalf("import stored %+v", rep.Stored)
		}
		return n
	})
}

// benchNode opens a node with its API on loopback, closed when b ends.
func benchNode(b *testing.B, data string) *node.Node {
	b.Helper()
	n := node.New(node.Config{DataDir: data, HTTPAddr: "127.0.0.1:0", Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Logger: discardLogger()})
	if err := n.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = n.Close() })
	return n
}

// localWriteRate is the node's local-write rate on this machine now: 20,000
// claims of 4 signers, signed beforehand, posted to a running node over
// its API in batches of 1,000 (BenchmarkNode_LocalWrites's measure).
func localWriteRate(b *testing.B) rates {
	b.Helper()
	const n = 20_000
	signers := make([]*store.Signer, 4)
	for i := range signers {
		signers[i] = fixedSigner(fmt.Sprint("bench ", i))
	}
	claims := make([]store.Claim, n)
	ts := uint64(time.Now().UnixMilli()) - n
	var wg sync.WaitGroup
	w := runtime.GOMAXPROCS(0)
	for k := range w {
		wg.Go(func() {
			for i := k; i < n; i += w {
				claims[i] = signers[i%4].Text(fixMid(fmt.Sprint("local ", i/17)), fmt.Sprint("field", i%17), fmt.Sprint("v", i), ts+uint64(i))
			}
		})
	}
	wg.Wait()
	nd := benchNode(b, filepath.Join(b.TempDir(), "local"))
	cl := api.NewClient(nd.APIURL())
	defer cl.Close()
	return measure("local", func() int64 {
		for lo := 0; lo < n; lo += 1000 {
			res, err := cl.PostClaims(context.Background(), claims[lo:lo+1000])
			if err != nil || res.Rejected > 0 {
				b.Fatalf("local writes: %v %+v", err, res.Results[0])
			}
		}
		return n
	})
}
