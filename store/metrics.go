package store

import "github.com/prometheus/client_golang/prometheus"

// metrics are always collected; they are registered only when the store
// is given a Registerer.
type metrics struct {
	claims  *prometheus.CounterVec
	queue   prometheus.Gauge
	commit  prometheus.Histogram
	batch   prometheus.Histogram
	events  *prometheus.CounterVec
	subs    *prometheus.GaugeVec
	behind  *prometheus.CounterVec
	remerge prometheus.Gauge

	truthCommits *prometheus.CounterVec

	searches      *prometheus.GaugeVec   // running, waiting
	searchRefused *prometheus.CounterVec // too_large, busy, timeout
	searchRows    prometheus.Counter

	damageFound, damageAside, cacheRepairs  prometheus.Counter
	quarantined                             prometheus.Gauge
	scrubChecked, scrubDamaged, scrubPasses prometheus.Counter
	scrubRecords                            prometheus.Counter
	scrubPass, scrubRate                    prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metanode_store_claims_total", Help: "Claims submitted, by outcome.",
		}, []string{"outcome"}),
		queue: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "metanode_store_queue_depth", Help: "Requests waiting for the writer.",
		}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "metanode_store_commit_seconds", Help: "Time to commit one batch (truth and cache).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "metanode_store_batch_claims", Help: "Claims per group commit.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 8),
		}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metanode_store_events_total", Help: "Events appended, by stream.",
		}, []string{"stream"}),
		subs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "metanode_store_subscribers", Help: "Open subscriptions, by stream.",
		}, []string{"stream"}),
		behind: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metanode_store_subscriber_fallbacks_total",
			Help: "Live subscribers whose channel was full, handed to a pump that reads the event rows, by stream.",
		}, []string{"stream"}),
		remerge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "metanode_store_remerge_pending_records",
			Help: "Records a trust change has yet to re-merge (done in chunks between writes).",
		}),
		truthCommits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metanode_store_truth_commits_total",
			Help: "Truth transactions, by sync mode: full (fsync; local writes, trust, files) or normal (claims from peers only).",
		}, []string{"sync"}),
		searches: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "metanode_store_searches", Help: "Searches holding a slot (running) or waiting for one (waiting).",
		}, []string{"state"}),
		searchRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metanode_store_search_refused_total",
			Help: "Searches refused, by reason: too_large (past a limit), busy (no slot), timeout (budget spent).",
		}, []string{"reason"}),
		searchRows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "metanode_store_search_rows_total", Help: "Rows searches read from the cache.",
		}),
	}
	m.addDamage()
	if reg != nil {
		reg.MustRegister(m.claims, m.queue, m.commit, m.batch, m.events, m.subs, m.behind, m.remerge, m.truthCommits,
			m.searches, m.searchRefused, m.searchRows,
			m.damageFound, m.damageAside, m.cacheRepairs, m.quarantined,
			m.scrubChecked, m.scrubDamaged, m.scrubPasses, m.scrubPass, m.scrubRate, m.scrubRecords)
	}
	return m
}

// addDamage makes the metrics of damage found at rest (damage.go,
// cacherepair.go) and of the scrub (scrub.go).
func (m *metrics) addDamage() {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	m.damageFound = counter("metanode_store_damaged_rows_found_total",
		"Truth rows whose id or signature did not hold when read, merged or scrubbed (reported to the writer, which repairs or quarantines them).")
	m.damageAside = counter("metanode_store_quarantined_total", "Claims set aside as damaged (quarantined).")
	m.quarantined = gauge("metanode_store_quarantined_claims", "Claims in quarantine now: damaged, neither served nor merged, until the genuine claim is back.")
	m.cacheRepairs = counter("metanode_store_cache_repairs_total", "Records a read found lost from the cache, merged again from truth.")
	m.scrubChecked = counter("metanode_store_scrub_claims_total", "Claims whose id and signature the background scrub checked.")
	m.scrubDamaged = counter("metanode_store_scrub_damaged_total", "Claims the scrub found damaged.")
	m.scrubPasses = counter("metanode_store_scrub_passes_total", "Scrub passes over every claim completed.")
	m.scrubPass = gauge("metanode_store_scrub_pass_ratio", "How far the scrub's current pass is, 0 to 1.")
	m.scrubRate = gauge("metanode_store_scrub_rate", "Claims a second the scrub paces itself to.")
	m.scrubRecords = counter("metanode_store_scrub_records_total", "Records whose cache rows the scrub compared with truth.")
}
