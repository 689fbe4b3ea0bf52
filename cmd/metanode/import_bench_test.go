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
// a stopped node's data directory, and reports the rate in claims per second
// and as a ratio to the node's local-write rate measured in the same run
// (as BenchmarkNode_LocalWrites measures it: 20,000 signed claims of 4
// signers posted to a running node in batches of 1,000). With
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
	local := localWriteRate(b)
	dir := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		data := filepath.Join(dir, fmt.Sprint("offline", i))
		rate, n := benchImport(b, "--from-redis", url, "--data", data)
		b.ReportMetric(rate, "claims/s")
		b.ReportMetric(rate/local, "ratio-to-local-writes")
		b.Logf("offline: %d claims at %.0f claims/s = %.2f of the local-write rate %.0f/s", n, rate, rate/local, local)
		if os.Getenv("METANODE_BENCH_IMPORT_API") == "1" {
			b.StopTimer()
			n0 := benchNode(b, filepath.Join(dir, fmt.Sprint("api", i)))
			b.StartTimer()
			rate, n := benchImport(b, "--from-redis", url, "--data", filepath.Join(dir, fmt.Sprint("api", i)), "--api", n0.APIURL())
			b.ReportMetric(rate, "api-claims/s")
			b.ReportMetric(rate/local, "api-ratio-to-local-writes")
			b.Logf("through the API: %d claims at %.0f claims/s = %.2f of the local-write rate", n, rate, rate/local)
		}
	}
	b.ReportMetric(local, "local-writes/s")
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
// start to its end, and returns claims stored per second and the count.
func benchImport(b *testing.B, args ...string) (float64, int64) {
	b.Helper()
	var out, errb bytes.Buffer
	c := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: envMap(map[string]string{"HOME": b.TempDir()})}
	start := time.Now()
	if code := c.run(context.Background(), append([]string{"import"}, args...)); code != 0 {
		b.Fatalf("import: exit %d\n%s", code, errb.String())
	}
	secs := time.Since(start).Seconds()
	var rep importReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		b.Fatal(err)
	}
	n := rep.Stored.Accepted + rep.Stored.Unchanged
	if rep.Stored.Rejected != 0 || n == 0 {
		b.Fatalf("import stored %+v", rep.Stored)
	}
	return float64(n) / secs, n
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
func localWriteRate(b *testing.B) float64 {
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
	start := time.Now()
	for lo := 0; lo < n; lo += 1000 {
		res, err := cl.PostClaims(context.Background(), claims[lo:lo+1000])
		if err != nil || res.Rejected > 0 {
			b.Fatalf("local writes: %v %+v", err, res.Results[0])
		}
	}
	return n / time.Since(start).Seconds()
}
