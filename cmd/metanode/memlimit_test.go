package main

import (
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  string
	}{
		{"auto", 0, ""},
		{"off", -1, ""},
		{"512MiB", 512 << 20, ""},
		{"1GiB", 1 << 30, ""},
		{"65536KiB", 64 << 20, ""},
		{"104857600", 100 << 20, ""},
		{"104857600B", 100 << 20, ""},
		{"2TiB", 2 << 40, ""},
		{"63MiB", 0, "at least 64MiB"},
		{"0", 0, "at least 64MiB"},
		{"", 0, "want auto, off, or a size"},
		{"512MB", 0, "want auto, off, or a size"}, // GOMEMLIMIT's syntax: MiB, not MB
		{"-1GiB", 0, "want auto, off, or a size"},
		{"1.5GiB", 0, "want auto, off, or a size"},
		{"99999999999TiB", 0, "want auto, off, or a size"}, // overflows
		{"Auto", 0, "want auto, off, or a size"},
	} {
		got, err := parseMemoryLimit(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: got %d, %v; want an error saying %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: got %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestLimitFollower(t *testing.T) {
	const mib = 1 << 20
	// looks runs a follower over live heaps (MiB) and returns its limit.
	looks := func(f *limitFollower, live ...uint64) int64 {
		for _, l := range live {
			f.next(l * mib)
		}
		return f.cur
	}
	repeat := func(n int, live uint64) []uint64 {
		out := make([]uint64, n)
		for i := range out {
			out[i] = live
		}
		return out
	}
	for _, tc := range []struct {
		name string
		live []uint64
		want int64
	}{
		{"before any collection", []uint64{0}, memoryFloor},
		{"a million claims: 1.5x live under the floor", []uint64{80}, memoryFloor},
		{"past the floor: 1.5x live and an eighth", []uint64{100}, 675 * mib / 4},
		{"a wobble moves nothing", []uint64{100, 101, 99, 102, 100}, 675 * mib / 4},
		{"back from a burst: the floor after 30 s", append([]uint64{78, 100}, repeat(memoryLowerAfter, 80)...), memoryFloor},
		{"but not before", append([]uint64{78, 100}, repeat(memoryLowerAfter-1, 80)...), 675 * mib / 4},
		{"one look wanting more restarts the count", append(append([]uint64{100}, repeat(memoryLowerAfter-1, 60)...), 100, 60), 675 * mib / 4},
		{"lowered to the most the looks wanted", append([]uint64{400}, append(repeat(memoryLowerAfter-1, 200), 210)...), 315 * mib * 9 / 8},
	} {
		if got := looks(newLimitFollower(), tc.live...); got != tc.want {
			t.Errorf("%s: limit %.2f MiB, want %.2f MiB", tc.name, float64(got)/mib, float64(tc.want)/mib)
		}
	}
	if got := newLimitFollower().next(math.MaxUint64); got <= memoryFloor {
		t.Errorf("the largest live heap gives %d", got)
	}
}

// fakeLimit records what a governor sets, as debug.SetMemoryLimit would
// see it.
type fakeLimit struct {
	mu    sync.Mutex
	cur   int64
	calls []int64
}

func (f *fakeLimit) set(v int64) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev := f.cur
	if v >= 0 {
		f.cur = v
		f.calls = append(f.calls, v)
	}
	return prev
}

func (f *fakeLimit) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *fakeLimit) get() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur
}

// testGovernor is a governor looking every millisecond at the live heap
// it returns (set to live bytes), setting the fake limit it returns, which
// starts as Go's default: no limit.
func testGovernor(live uint64) (*memoryGovernor, *fakeLimit, *atomic.Uint64) {
	f := &fakeLimit{cur: math.MaxInt64}
	heap := &atomic.Uint64{}
	heap.Store(live)
	g := &memoryGovernor{set: f.set, live: heap.Load, every: time.Millisecond, log: slog.New(slog.DiscardHandler), stop: make(chan struct{})}
	return g, f, heap
}

func TestMemoryGovernor(t *testing.T) {
	const before = math.MaxInt64 // Go's default: no limit
	t.Run("auto follows the live heap and restores", func(t *testing.T) {
		g, f, live := testGovernor(10 << 20)
		g.start("auto", "")
		if got := f.get(); got != memoryFloor {
			t.Fatalf("auto set %d, want the floor %d", got, memoryFloor)
		}
		live.Store(300 << 20) // a library grown past the floor
		waitFor(t, func() bool { return f.get() == 2025<<20/4 }, "the limit to follow a 300 MiB live heap to 506.25 MiB (1.5x and an eighth)")
		// A live heap that wobbles (every look finds a few bytes more or
		// less) moves nothing and logs nothing.
		calls := f.count()
		for i := range 50 {
			live.Store(300<<20 + uint64(i%2)*64)
			time.Sleep(time.Millisecond)
		}
		if n := f.count(); n != calls {
			t.Fatalf("a 64-byte wobble of the live heap set the limit %d times", n-calls)
		}
		live.Store(20 << 20)
		waitFor(t, func() bool { return f.get() == memoryFloor }, "the limit to come back to the floor")
		if n := f.count(); n != calls+1 {
			t.Fatalf("coming back to the floor set the limit %d times, want once", n-calls)
		}
		g.Close()
		g.Close() // idempotent
		if got := f.get(); got != before {
			t.Fatalf("after Close the limit is %d, want the one found at start", got)
		}
	})
	t.Run("a size is fixed", func(t *testing.T) {
		g, f, _ := testGovernor(900 << 20)
		g.start("512MiB", "")
		time.Sleep(20 * time.Millisecond) // twenty ticks of an auto governor
		if got := f.get(); got != 512<<20 || len(f.calls) != 1 {
			t.Fatalf("limit %d after %d calls, want 512 MiB set once", got, len(f.calls))
		}
		g.Close()
		if f.get() != before {
			t.Fatal("not restored")
		}
	})
	for _, tc := range []struct{ name, setting, gomemlimit string }{
		{"off sets nothing", "off", ""},
		{"GOMEMLIMIT wins", "auto", "200MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, f, _ := testGovernor(0)
			g.start(tc.setting, tc.gomemlimit)
			g.Close()
			if len(f.calls) != 0 {
				t.Fatalf("set the limit: %v", f.calls)
			}
		})
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
