package proxy

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// Metrics are the proxy's Prometheus metrics.
type Metrics struct {
	requests *prometheus.CounterVec
	duration prometheus.Histogram
	bytes    prometheus.Counter
	checks   *prometheus.CounterVec
	upgrades prometheus.Gauge
}

// NewMetrics registers the proxy's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hangar_proxy_requests_total",
			Help: "Requests the proxy answered, by status code."}, []string{"code"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hangar_proxy_request_duration_seconds",
			Help: "Time from a request to the end of its response (WebSockets: their whole life).", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "hangar_proxy_response_bytes_total",
			Help: "Bytes of response bodies written (WebSocket traffic excluded)."}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hangar_proxy_auth_checks_total",
			Help: "Access decisions, by result (allowed, or the refusal's reason, or error) and whether the cache answered."}, []string{"result", "cached"}),
		upgrades: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hangar_proxy_upgraded_connections",
			Help: "Upgrade requests (WebSockets) open now."}),
	}
	reg.MustRegister(m.requests, m.duration, m.bytes, m.checks, m.upgrades)
	return m
}

func (m *Metrics) observe(status int, d time.Duration, bytes int64) {
	m.requests.WithLabelValues(strconv.Itoa(status)).Inc()
	m.duration.Observe(d.Seconds())
	m.bytes.Add(float64(bytes))
}

func (m *Metrics) checked(d protocol.ProxyCheckResponse, cached bool, err error) {
	m.checks.WithLabelValues(decisionLabel(d.Allowed, d.Reason, err), strconv.FormatBool(cached)).Inc()
}

// decisionLabel is a metric's result label for a server decision: allowed, the refusal's reason,
// or error.
func decisionLabel(allowed bool, reason string, err error) string {
	switch {
	case err != nil:
		return "error"
	case !allowed:
		return reason
	}
	return "allowed"
}
