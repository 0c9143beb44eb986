package control

import (
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the node's Prometheus collectors; each node has its own registry so tests can run
// several nodes in one process.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	draining prometheus.Gauge
	inFlight prometheus.Gauge
}

func newMetrics() *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_http_requests_total", Help: "HTTP requests by method, route and status.",
		}, []string{"method", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "parley_http_request_duration_seconds", Help: "HTTP request latency by method and route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10},
		}, []string{"method", "route"}),
		draining: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "parley_draining", Help: "1 while the node drains before stopping.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "parley_http_requests_in_flight", Help: "HTTP requests being served now.",
		}),
	}
	reg.MustRegister(m.requests, m.duration, m.draining, m.inFlight,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func debugStack() []byte { return debug.Stack() }
