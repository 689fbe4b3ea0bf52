package watcher_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/metanode/metanode/node/watcher"
	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// BenchmarkScan measures the initial scan (every file hashed), a restart
// over an unchanged tree (nothing hashed) and a restart after every
// directory was moved (each file hashed once to pair its rename by cid), as
// files/s and as a ratio to the machine's limit measured in the same run:
// midhash256 of the same files by as many goroutines as the watcher's
// HashWorkers, with no watcher.
func BenchmarkScan(b *testing.B) {
	const files, size, workers, dirs = 2000, 64 << 10, 2, 50
	root := b.TempDir()
	data := make([]byte, size)
	var paths []string
	for i := range files {
		data[0], data[1] = byte(i), byte(i>>8)
		p := filepath.Join(root, fmt.Sprintf("d%02d/f%04d.bin", i%dirs, i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
		paths = append(paths, p)
	}

	limit := func() float64 { // files/s hashed directly
		start := time.Now()
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := w; i < len(paths); i += workers {
					if _, _, err := store.Midhash256File(paths[i]); err != nil {
						b.Error(err)
					}
				}
			})
		}
		wg.Wait()
		return float64(len(paths)) / time.Since(start).Seconds()
	}

	// moveDirs renames every directory (there and back), as while the node
	// was down.
	moveDirs := func(from, to string) {
		for i := range dirs {
			if err := os.Rename(filepath.Join(root, fmt.Sprintf("%s%02d", from, i)),
				filepath.Join(root, fmt.Sprintf("%s%02d", to, i))); err != nil {
				b.Fatal(err)
			}
		}
	}

	scan := func(st watcher.Store) (rate float64, hashed int64) {
		w := watcher.New(watcher.Config{Root: root, Store: st, HashWorkers: workers, Rescan: -1,
			Logger: slog.New(slog.DiscardHandler)})
		start := time.Now()
		if err := w.Open(b.Context()); err != nil {
			b.Fatal(err)
		}
		<-w.Ready()
		rate = float64(files) / time.Since(start).Seconds()
		hashed = w.Stats().Hashed
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		return rate, hashed
	}

	for _, bc := range []struct {
		name string
		st   func() watcher.Store
	}{
		{"MemStore", func() watcher.Store { return newMemStore() }},
		{"RealStore", func() watcher.Store { return storetest.Open(b, store.Config{}) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				lim := limit()
				st := bc.st()
				first, h1 := scan(st)
				again, h2 := scan(st)
				moveDirs("d", "m")
				moved, h3 := scan(st)
				moveDirs("m", "d")
				if h1 != files || h2 != 0 || h3 != files {
					b.Fatalf("hashed %d, %d, %d; want %d, 0, %d", h1, h2, h3, files, files)
				}
				b.ReportMetric(lim, "limit-files/s")
				b.ReportMetric(first, "scan-files/s")
				b.ReportMetric(first/lim, "scan/limit")
				b.ReportMetric(again, "rescan-files/s")
				b.ReportMetric(again/lim, "rescan/limit")
				b.ReportMetric(moved, "moved-files/s")
				b.ReportMetric(moved/lim, "moved/limit")
			}
		})
	}
}
