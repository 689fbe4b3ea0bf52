package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the api's own collectors; the store and the swarm register
// theirs (claims committed, queue depth, commit latency, …) on the same
// registry, and /metrics serves them all through the Gatherer.
type metrics struct {
	requests    *prometheus.CounterVec   // route, code
	latency     *prometheus.HistogramVec // route
	claims      *prometheus.CounterVec   // outcome, as answered by POST /api/claims
	subscribers *prometheus.GaugeVec     // stream
	events      *prometheus.CounterVec   // stream
	dropped     *prometheus.CounterVec   // stream, reason
	bodyBytes   prometheus.Gauge         // request body bytes reserved (budget.go)
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metanode_http_requests_total",
			Help: "HTTP requests answered, by route pattern and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "metanode_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route pattern (SSE streams excluded).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metanode_api_claims_total",
			Help: "Claims answered by POST /api/claims, by outcome.",
		}, []string{"outcome"}),
		subscribers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "metanode_sse_subscribers",
			Help: "Open SSE streams, by stream.",
		}, []string{"stream"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metanode_sse_events_total",
			Help: "Events written to SSE streams (snapshot events included), by stream.",
		}, []string{"stream"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metanode_sse_disconnects_total",
			Help: "SSE streams ended by the server, by stream and reason (slow, write, shutdown).",
		}, []string{"stream", "reason"}),
		bodyBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "metanode_http_body_bytes_in_flight",
			Help: "Request body bytes reserved by requests being read or handled (at most the body budget).",
		}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	m.requests, err = register(reg, m.requests)
	if err != nil {
		return nil, err
	}
	if m.latency, err = register(reg, m.latency); err != nil {
		return nil, err
	}
	if m.claims, err = register(reg, m.claims); err != nil {
		return nil, err
	}
	if m.subscribers, err = register(reg, m.subscribers); err != nil {
		return nil, err
	}
	if m.events, err = register(reg, m.events); err != nil {
		return nil, err
	}
	if m.dropped, err = register(reg, m.dropped); err != nil {
		return nil, err
	}
	if m.bodyBytes, err = register(reg, m.bodyBytes); err != nil {
		return nil, err
	}
	return m, nil
}

// register adds c to reg, or reuses the identical collector a previous
// server on the same registry registered (a node reopening its API).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, fmt.Errorf("register metrics: %w", err)
	}
	return c, nil
}

// routeMetrics are one route's observers, curried once at registration so a
// request pays no label lookup for the latency.
type routeMetrics struct {
	route   string
	latency prometheus.Observer
	codes   *prometheus.CounterVec
	ok      prometheus.Counter // the common 200, pre-curried
}

func (m *metrics) forRoute(route string) *routeMetrics {
	return &routeMetrics{
		route:   route,
		latency: m.latency.WithLabelValues(route),
		codes:   m.requests,
		ok:      m.requests.WithLabelValues(route, "200"),
	}
}

func (rm *routeMetrics) observe(code int, d time.Duration, stream bool) {
	if code == http.StatusOK {
		rm.ok.Inc()
	} else {
		rm.codes.WithLabelValues(rm.route, strconv.Itoa(code)).Inc()
	}
	if !stream {
		rm.latency.Observe(d.Seconds())
	}
}

// metricsHandler serves g in the Prometheus text format.
func metricsHandler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}
