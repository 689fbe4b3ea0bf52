package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
)

// Defaults of the body budget (docs/http.md "Limits").
const (
	// DefaultBodyBudget is how many request body bytes may be in flight
	// across all requests: two bodies of the largest size.
	DefaultBodyBudget = 2 * MaxClaimsBody
	// DefaultBodyWait is how long a request waits for room before 503 busy.
	DefaultBodyWait = 2 * time.Second
)

// SlugBusy: the server has no room for the request's body now; retry.
const SlugBusy = "busy"

// ErrBusy is wrapped by the answer to a request refused for the budget.
var ErrBusy = errors.New("busy")

// bodyBudget bounds the memory that request bodies and what handlers
// decode from them can hold at once. Each request with a body reserves,
// before its handler runs, what it may read: its Content-Length, or the
// largest body when the length is unknown (chunked), never more than
// MaxClaimsBody (a larger body is refused at that size). The reservation
// is kept until the handler returns, since the decoded claims live as long
// as the body did. Requests wait in order (semaphore.Weighted is FIFO) for
// at most wait, then get 503 busy with Retry-After.
type bodyBudget struct {
	sem   *semaphore.Weighted
	total int64
	wait  time.Duration
	gauge prometheus.Gauge
}

func newBodyBudget(total int64, wait time.Duration, gauge prometheus.Gauge) *bodyBudget {
	return &bodyBudget{sem: semaphore.NewWeighted(total), total: total, wait: wait, gauge: gauge}
}

// weight is what r reserves: 0 for a request without a body.
func weight(r *http.Request) int64 {
	switch {
	case r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0:
		return 0
	case r.ContentLength < 0 || r.ContentLength > MaxClaimsBody:
		return MaxClaimsBody
	}
	return r.ContentLength
}

// reserve waits for room for r's body; the caller calls release once the
// handler is done.
func (b *bodyBudget) reserve(r *http.Request) (release func(), err error) {
	n := weight(r)
	if n == 0 {
		return func() {}, nil
	}
	if !b.sem.TryAcquire(n) {
		ctx, cancel := context.WithTimeout(r.Context(), b.wait)
		err := b.sem.Acquire(ctx, n)
		cancel()
		if err != nil {
			return nil, &Error{Status: http.StatusServiceUnavailable, Slug: SlugBusy, Retryable: true, err: ErrBusy,
				Message: fmt.Sprintf("the server is reading other large requests (%d MiB of bodies in flight at most): retry in a second", b.total>>20)}
		}
	}
	b.gauge.Add(float64(n))
	return func() {
		b.gauge.Sub(float64(n))
		b.sem.Release(n)
	}, nil
}
