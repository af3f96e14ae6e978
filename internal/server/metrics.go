package server

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/lifecycle"
	"github.com/hangar-dev/hangar/internal/prebuilds"
	"github.com/hangar-dev/hangar/internal/store"
)

type metrics struct {
	reg       *prometheus.Registry
	duration  *prometheus.HistogramVec
	reqBytes  *prometheus.HistogramVec
	respBytes *prometheus.HistogramVec
	orphans   prometheus.Counter
	waits     *prometheus.CounterVec
	waiters   prometheus.Gauge
	jobTime   *prometheus.HistogramVec
	builds    *prometheus.CounterVec
	lifecycle *prometheus.CounterVec
	// Prebuilt pools, by template and preset (an admin's presets: a bounded set).
	prebuildsCreated, prebuildsClaimed, prebuildsFailed *prometheus.CounterVec
	store                                               store.Store
}

func newMetrics(st store.Store, b *tfbackend.Service, now func() time.Time) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), store: st}
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "hangar_reconcile_duration_seconds", Help: "Time to serve an agent reconcile request, by update type.",
		Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"update_type"})
	sizes := prometheus.ExponentialBuckets(256, 4, 10)
	m.reqBytes = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "hangar_reconcile_request_bytes", Help: "Size of agent reconcile request bodies.", Buckets: sizes,
	}, []string{"update_type"})
	m.respBytes = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "hangar_reconcile_response_bytes", Help: "Size of reconcile response bodies.", Buckets: sizes,
	}, []string{"update_type"})
	m.orphans = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hangar_reconcile_orphans_total", Help: "Workspaces agents reported that the server did not know (answered Terminated).",
	})
	m.waits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hangar_agent_waits_total", Help: "Agent waits for changes (GET /api/v1/agent/wait), by how they ended: pending, timeout, canceled (the agent went away or the server shut down), revoked (the agent's token was revoked or rotated meanwhile: 401).",
	}, []string{"result"})
	for _, result := range []string{"pending", "timeout", "canceled", "revoked"} {
		m.waits.WithLabelValues(result) // exported at 0 from the start
	}
	m.waiters = prometheus.NewGauge(prometheus.GaugeOpts{Name: "hangar_agent_waiters", Help: "Agent waits blocked now: nothing was pending when they looked."})
	m.jobTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "hangar_provisioner_job_duration_seconds", Help: "Time from a provisioner picking a build up to its end, by transition and result.",
		Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600},
	}, []string{"transition", "result"})
	m.builds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hangar_workspace_builds_total", Help: "Workspace builds that ended, by transition and result (succeeded, failed, canceled).",
	}, []string{"transition", "result"})
	m.lifecycle = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hangar_lifecycle_changes_total", Help: "Changes the lifecycle executor made, by reason (autostart, autostop, failure_ttl, dormancy, autodelete, max_active, max_stopped).",
	}, []string{"reason"})
	for _, r := range []build.Reason{build.ReasonAutostart, build.ReasonAutostop, build.ReasonFailureTTL, build.ReasonDormancy,
		build.ReasonAutodelete, build.ReasonMaxActive, build.ReasonMaxStopped} {
		m.lifecycle.WithLabelValues(string(r))
	}
	m.prebuildsCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hangar_prebuilds_created_total", Help: "Prebuilt workspaces the prebuild reconciler created, by template and preset.",
	}, []string{"template", "preset"})
	m.prebuildsClaimed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hangar_prebuilds_claimed_total", Help: "Prebuilt workspaces users claimed at create, by template and preset.",
	}, []string{"template", "preset"})
	m.prebuildsFailed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hangar_prebuilds_failed_total", Help: "Prebuilt workspaces whose create failed, by template and preset.",
	}, []string{"template", "preset"})
	b.Observe(m.observeBuild)
	m.reg.MustRegister(m.waits, m.waiters, m.duration, m.reqBytes, m.respBytes, m.orphans, m.jobTime, m.builds, m.lifecycle,
		m.prebuildsCreated, m.prebuildsClaimed, m.prebuildsFailed, &poolCollector{store: st, now: now},
		&stateCollector{store: st}, &jobCollector{store: st, builder: b},
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

func (m *metrics) observeLifecycle(a lifecycle.Action) {
	m.lifecycle.WithLabelValues(string(a.Reason)).Inc()
}

func (m *metrics) observePrebuildCreated(p store.Preset) {
	m.prebuildsCreated.WithLabelValues(p.TemplateName, p.Name).Inc()
}

func (m *metrics) observeBuild(b build.Build) {
	if b.IsPrebuild && b.Job.Status() == build.Failed {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if w, err := m.store.WorkspaceByID(ctx, b.WorkspaceID); err == nil {
			m.prebuildsFailed.WithLabelValues(w.TemplateName, w.PresetName).Inc()
		}
	}
	result := string(b.Job.Status())
	m.builds.WithLabelValues(string(b.Transition), result).Inc()
	if b.Job.StartedAt != nil && b.Job.CompletedAt != nil {
		m.jobTime.WithLabelValues(string(b.Transition), result).Observe(b.Job.CompletedAt.Sub(*b.Job.StartedAt).Seconds())
	}
}

// jobCollector counts provisioner jobs by status, and the provisioner daemons connected, at scrape
// time.
type jobCollector struct {
	store   store.Store
	builder *tfbackend.Service
}

var (
	jobsDesc    = prometheus.NewDesc("hangar_provisioner_jobs", "Provisioner jobs by status (pending and running are the queue and the work in progress).", []string{"status"}, nil)
	daemonsDesc = prometheus.NewDesc("hangar_provisioner_daemons_connected", "Provisioner daemons (in process or remote) that asked this server for work or heartbeated in the last minute.", nil, nil)
)

func (c *jobCollector) Describe(ch chan<- *prometheus.Desc) { ch <- jobsDesc; ch <- daemonsDesc }

func (c *jobCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(daemonsDesc, prometheus.GaugeValue, float64(c.builder.ConnectedWorkers()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.store.CountJobs(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(jobsDesc, err)
		return
	}
	for st, n := range counts {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(n), string(st))
	}
}

func (m *metrics) observeReconcile(updateType string, d time.Duration, reqBytes, respBytes int64) {
	m.duration.WithLabelValues(updateType).Observe(d.Seconds())
	m.reqBytes.WithLabelValues(updateType).Observe(float64(reqBytes))
	m.respBytes.WithLabelValues(updateType).Observe(float64(respBytes))
}

// stateCollector counts workspaces by desired and actual state at scrape time.
type stateCollector struct{ store store.Store }

var workspacesDesc = prometheus.NewDesc("hangar_workspaces", "Workspaces by desired and actual state.", []string{"desired_state", "actual_state"}, nil)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- workspacesDesc }

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.store.CountWorkspacesByState(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(workspacesDesc, err)
		return
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(workspacesDesc, prometheus.GaugeValue, float64(n), string(k[0]), string(k[1]))
	}
}

type countingReader struct {
	r io.ReadCloser
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) Close() error { return c.r.Close() }

type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

// poolCollector reports each preset's pool at scrape time: desired, ready and building instances,
// and its creates that failed in a row.
type poolCollector struct {
	store store.Store
	now   func() time.Time
}

var poolFailuresDesc = prometheus.NewDesc("hangar_prebuild_pool_failures", "Prebuild creates of each preset's pool that failed in a row since the last that succeeded (0: the pool is healthy; bounded by the backoff's reach).",
	[]string{"template", "preset"}, nil)

var poolDesc = prometheus.NewDesc("hangar_prebuild_pool", "Prebuilt workspaces of each preset's pool by status: desired (wanted now), ready (claimable), building (pending or running creates).",
	[]string{"template", "preset", "status"}, nil)

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) { ch <- poolDesc; ch <- poolFailuresDesc }

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pools, err := prebuilds.Pools(ctx, c.store, c.now())
	if err != nil {
		ch <- prometheus.NewInvalidMetric(poolDesc, err)
		return
	}
	for _, p := range pools {
		for status, n := range map[string]int{"desired": p.Actions.Desired, "ready": p.Actions.Ready, "building": p.Actions.Building} {
			ch <- prometheus.MustNewConstMetric(poolDesc, prometheus.GaugeValue, float64(n), p.Preset.TemplateName, p.Preset.Name, status)
		}
		ch <- prometheus.MustNewConstMetric(poolFailuresDesc, prometheus.GaugeValue, float64(len(p.Failures)), p.Preset.TemplateName, p.Preset.Name)
	}
}
