package main

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The memory-limit setting: a soft limit on the Go runtime's own memory
// (debug.SetMemoryLimit; SQLite's page caches are outside it).
//
// Go's collector lets the heap grow to twice what is live before it
// collects, may overshoot that while something allocates fast, and keeps
// what it freed for a while. A home node of a million claims holds about
// 60-80 MB live, yet a trust change that re-merges every record took the
// process to 306-314 MB of RSS without a limit, 295-319 MB with 160 MiB
// and 263-288 MB with 128 MiB (docs/benchmarks.md, "Memory by phase");
// its SQLite page caches and the binary, outside the limit, are about
// 140 MB of that. "auto", the home default, keeps the limit at
// memoryFloor, or at about 1.5 times the live heap when that is more (a
// library beyond the reference scale, live heap above ~85 MiB), so the
// collector never has less headroom than half the live heap: it runs up
// to twice as often as with Go's defaults, never all the time. It looks
// every memoryRecheck (a live heap grows past the floor in the seconds
// after a start, as the sync set loads); see limitFollower. A bootstrap node's default is
// "off" (Go's defaults). GOMEMLIMIT, when set, wins over the setting.
const (
	memoryFloor   = 128 << 20 // every phase under 300 MB of RSS at a million claims
	memoryMinimum = 64 << 20  // below it a node cannot even load its sync set
	memoryRecheck = 2 * time.Second
	// memoryLowerAfter looks wanting less lower the limit (30 s).
	memoryLowerAfter = 15
)

// parseMemoryLimit reads a memory-limit value: auto, off, or a size in
// GOMEMLIMIT's syntax (bytes with an optional B, KiB, MiB, GiB or TiB).
// It returns the size, or 0 for auto and -1 for off.
func parseMemoryLimit(v string) (int64, error) {
	switch v {
	case "auto":
		return 0, nil
	case "off":
		return -1, nil
	}
	num, mult := v, int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}} {
		if s, ok := strings.CutSuffix(v, u.suffix); ok {
			num, mult = s, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, errors.New("want auto, off, or a size such as 256MiB or 1GiB")
	}
	if n*mult < memoryMinimum {
		return 0, fmt.Errorf("at least %dMiB: a node needs that much to load its sync set", memoryMinimum>>20)
	}
	return n * mult, nil
}

// limitFollower is auto's rule. The limit it wants for a live heap is
// 1.5 times that heap and an eighth more, or the floor while 1.5 times the
// heap is under the floor. It raises the limit at once when 1.5 times the
// live heap passes it (the eighth is room, so a growing heap does not move
// it at every look), and lowers it only after memoryLowerAfter looks in a
// row all wanted at least a sixteenth less, to the most of those: a heap
// that wobbles moves nothing, and one back from a burst gets its limit
// back (to the floor at a million claims) within a minute.
type limitFollower struct {
	cur   int64 // the limit set
	below int   // looks in a row that wanted less
	most  int64 // the most those looks wanted
}

func newLimitFollower() *limitFollower { return &limitFollower{cur: memoryFloor} }

func (f *limitFollower) next(live uint64) int64 {
	l := int64(min(live, math.MaxInt64/4))
	target := l + l/2
	want := int64(memoryFloor)
	if target > memoryFloor {
		want = target + target/8
	}
	switch {
	case target > f.cur:
		f.cur, f.below = want, 0
	case want < f.cur-f.cur/16:
		if f.below == 0 || want > f.most {
			f.most = want
		}
		if f.below++; f.below >= memoryLowerAfter {
			f.cur, f.below = f.most, 0
		}
	default:
		f.below = 0
	}
	return f.cur
}

// memoryGovernor applies the setting for the life of a node. set is
// debug.SetMemoryLimit in the binary; the governor restores the limit it
// found when it stops.
type memoryGovernor struct {
	set   func(int64) int64
	live  func() uint64
	every time.Duration // how often auto looks at the live heap
	log   *slog.Logger

	prev int64
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// startMemoryGovernor applies setting (already validated) and, for auto,
// follows the live heap until Close. With GOMEMLIMIT set (gomemlimit
// non-empty) or set nil (tests running nodes in their own process), it
// does nothing.
func startMemoryGovernor(setting, gomemlimit string, set func(int64) int64, log *slog.Logger) *memoryGovernor {
	g := &memoryGovernor{set: set, live: liveHeap, every: memoryRecheck, log: log, stop: make(chan struct{})}
	g.start(setting, gomemlimit)
	return g
}

func (g *memoryGovernor) start(setting, gomemlimit string) {
	set, log := g.set, g.log
	if set == nil {
		return
	}
	if gomemlimit != "" {
		if cur := set(-1); cur < memoryMinimum { // -1 reads the limit Go took from GOMEMLIMIT
			log.Warn("memory limit from GOMEMLIMIT is below what a node needs to load its sync set: its collector will run all the time; raise GOMEMLIMIT or unset it", "GOMEMLIMIT", gomemlimit, "minimum_bytes", memoryMinimum)
		} else {
			log.Info("memory limit from GOMEMLIMIT", "GOMEMLIMIT", gomemlimit, "memory-limit", setting)
		}
		g.set = nil
		return
	}
	size, _ := parseMemoryLimit(setting)
	switch {
	case size < 0:
		log.Info("memory limit off: Go's defaults", "memory-limit", setting)
		g.set = nil
		return
	case size > 0:
		g.prev = set(size)
		log.Info("memory limit", "mode", "size", "limit_bytes", size)
		return
	}
	f := newLimitFollower()
	limit := f.next(g.live())
	g.prev = set(limit)
	log.Info("memory limit", "mode", "auto", "limit_bytes", limit)
	g.wg.Go(func() { g.follow(f, limit) })
}

// follow moves the limit with the live heap (limitFollower).
func (g *memoryGovernor) follow(f *limitFollower, limit int64) {
	tick := time.NewTicker(g.every)
	defer tick.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-tick.C:
		}
		if next := f.next(g.live()); next != limit {
			limit = next
			g.set(limit)
			g.log.Info("memory limit follows the live heap", "limit_bytes", limit)
		}
	}
}

// Close stops following and restores the limit found at start.
func (g *memoryGovernor) Close() {
	g.once.Do(func() {
		close(g.stop)
		g.wg.Wait()
		if g.set != nil {
			g.set(g.prev)
		}
	})
}

// liveHeap is the heap the last collection found live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
