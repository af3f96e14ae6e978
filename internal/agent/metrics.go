package agent

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// Metrics are the agent's Prometheus series (docs/architecture.md, "Metrics"). A nil *Metrics
// records nothing.
type Metrics struct {
	cycle         *prometheus.HistogramVec
	applyDuration *prometheus.HistogramVec
	applyErrors   *prometheus.CounterVec
	applied       *prometheus.CounterVec
	queue         prometheus.Gauge
	leader        prometheus.Gauge
	events        *prometheus.CounterVec
}

// NewMetrics registers the agent's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		cycle: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hangar_agent_reconcile_cycle_duration_seconds", Help: "Time of one reconcile cycle (report, the server's answer, starting the applies it asks for), by update type (full, partial) and result (ok, error).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"update_type", "result"}),
		applyDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hangar_agent_apply_duration_seconds", Help: "Time of one server-side apply of one object, by kind (failed applies included).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"kind"}),
		applyErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hangar_agent_apply_errors_total", Help: "Server-side applies of one object that failed, by kind.",
		}, []string{"kind"}),
		applied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hangar_agent_objects_applied_total", Help: "Objects applied (server-side apply succeeded), by kind. Objects already in sync are not applied and not counted.",
		}, []string{"kind"}),
		queue: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hangar_agent_apply_queue_depth", Help: "Workspaces whose config waits for an apply slot (--apply-concurrency), not counting those being applied.",
		}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hangar_agent_leader", Help: "1 while this replica reconciles (it holds the Lease, or leader election is off), 0 on standby.",
		}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hangar_agent_kube_events_total", Help: "Kubernetes Events the agent recorded on workspaces' Deployments, by reason.",
		}, []string{"reason"}),
	}
	for _, ut := range []protocol.UpdateType{protocol.UpdateFull, protocol.UpdatePartial} {
		for _, res := range []string{"ok", "error"} {
			m.cycle.WithLabelValues(string(ut), res) // exported from the start, so rate() has a base
		}
	}
	for gvk := range knownKinds {
		m.applyErrors.WithLabelValues(gvk.Kind)
		m.applied.WithLabelValues(gvk.Kind)
	}
	reg.MustRegister(m.cycle, m.applyDuration, m.applyErrors, m.applied, m.queue, m.leader, m.events)
	return m
}

func (m *Metrics) observeCycle(ut protocol.UpdateType, d time.Duration, err error) {
	if m == nil {
		return
	}
	res := "ok"
	if err != nil {
		res = "error"
	}
	m.cycle.WithLabelValues(string(ut), res).Observe(d.Seconds())
}

// observeApply records one object's apply.
func (m *Metrics) observeApply(kind string, d time.Duration, err error) {
	if m == nil {
		return
	}
	m.applyDuration.WithLabelValues(kind).Observe(d.Seconds())
	if err != nil {
		m.applyErrors.WithLabelValues(kind).Inc()
	} else {
		m.applied.WithLabelValues(kind).Inc()
	}
}

func (m *Metrics) queued(delta int) {
	if m != nil {
		m.queue.Add(float64(delta))
	}
}

func (m *Metrics) setLeader(on bool) {
	if m == nil {
		return
	}
	if on {
		m.leader.Set(1)
	} else {
		m.leader.Set(0)
	}
}

func (m *Metrics) event(reason string) {
	if m != nil {
		m.events.WithLabelValues(reason).Inc()
	}
}
