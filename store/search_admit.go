package store

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// SearchConfig bounds what searches may take of the node (docs/store.md
// "Search"). Zero fields take the defaults.
type SearchConfig struct {
	// Slots is how many searches run at once, each on a read connection
	// of its own (record reads have theirs); default GOMAXPROCS/2, at
	// least 1, so a core is left to everything else.
	Slots int
	// Queue is how many searches may wait for a slot; past it a search is
	// refused at once with ErrBusy. Default 64.
	Queue int
	// Wait is the longest wait for a slot, then ErrBusy. Default 5 s.
	Wait time.Duration
	// Timeout is the time a search has once it holds a slot, then
	// ErrSearchTimeout. Default 5 s.
	Timeout time.Duration
}

func (c *SearchConfig) defaults() {
	if c.Slots <= 0 {
		c.Slots = max(1, runtime.GOMAXPROCS(0)/2)
	}
	if c.Queue <= 0 {
		c.Queue = 64
	}
	if c.Wait <= 0 {
		c.Wait = 5 * time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Second
	}
}

// searchEach is the default searchPool.each: up to this many candidates,
// the remaining filters are checked on each record's fields (about 20 rows
// each) rather than through their lookups (which may read a whole field's
// rows).
const searchEach = 256

// searchPool is what searches run on: a connection pool of their own on
// the cache, and the admission to it.
type searchPool struct {
	db    *sql.DB
	admit admission
	gate  atomic.Pointer[func(ctx context.Context) error] // test seam: called by each admitted search before it reads
	onRow func()                                          // test seam: called for each row a search reads
	each  int
}

// SetSearchGate installs a test seam (nil removes it): each search, once
// admitted, calls gate with its own context before it reads, and fails
// with gate's error. Tests of the packages above the store use it to hold
// searches in their slots.
func SetSearchGate(s *Store, gate func(ctx context.Context) error) {
	if gate == nil {
		s.sp.gate.Store(nil)
		return
	}
	s.sp.gate.Store(&gate)
}

// admission hands out the search slots: FIFO, a bounded queue, a bounded
// wait.
type admission struct {
	slots   chan struct{}
	queue   int64
	wait    time.Duration
	waiting atomic.Int64
	gauges  *prometheus.GaugeVec // running, waiting
}

func newAdmission(c SearchConfig, gauges *prometheus.GaugeVec) admission {
	return admission{slots: make(chan struct{}, c.Slots), queue: int64(c.Queue), wait: c.Wait, gauges: gauges}
}

// enter waits for a slot and returns its release. It fails with ErrBusy
// when the queue is full or no slot came free within the wait, and with
// ctx's error when ctx ends first.
func (a *admission) enter(ctx context.Context) (func(), error) {
	select {
	case a.slots <- struct{}{}:
		return a.running(), nil
	default:
	}
	if a.waiting.Add(1) > a.queue {
		a.waiting.Add(-1)
		return nil, fmt.Errorf("%w: %d searches are waiting already; retry later", ErrBusy, a.queue)
	}
	a.gauges.WithLabelValues("waiting").Inc()
	defer func() {
		a.waiting.Add(-1)
		a.gauges.WithLabelValues("waiting").Dec()
	}()
	t := time.NewTimer(a.wait)
	defer t.Stop()
	select {
	case a.slots <- struct{}{}:
		return a.running(), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return nil, fmt.Errorf("%w: no search slot came free within %s; retry later", ErrBusy, a.wait)
	}
}

func (a *admission) running() func() {
	a.gauges.WithLabelValues("running").Inc()
	return func() {
		a.gauges.WithLabelValues("running").Dec()
		<-a.slots
	}
}
