package server

import (
	"bufio"
	"database/sql"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// opsMetrics are the server's operational series beyond the domain's (metrics.go): HTTP requests by
// route pattern and code, the database pool, and the start-latency SLI (docs/architecture.md,
// "Metrics").
type opsMetrics struct {
	httpDuration *prometheus.HistogramVec
	httpRequests *prometheus.CounterVec
	starts       *prometheus.HistogramVec
}

func newOpsMetrics(reg prometheus.Registerer, st store.Store) *opsMetrics {
	m := &opsMetrics{
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hangar_http_request_duration_seconds", Help: "Time to serve an HTTP request, by method, route (the pattern it matched, not the raw path) and status code. Long-polls and streams last as long as they are open.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"method", "route", "code"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hangar_http_requests_total", Help: "HTTP requests served, by method, route (the pattern it matched) and status code.",
		}, []string{"method", "route", "code"}),
		starts: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hangar_workspace_start_duration_seconds", Help: "Time from a workspace's create, start or restart request until it was first seen Running, by backend (kubernetes, terraform): the user-facing start latency. Each start is observed once, by the replica that wrote Running.",
			Buckets: []float64{.5, 1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200, 1800, 3600},
		}, []string{"backend"}),
	}
	for _, b := range []string{workspace.KindKubernetes, workspace.KindTerraform} {
		m.starts.WithLabelValues(b) // exported at 0 from the start
	}
	reg.MustRegister(m.httpDuration, m.httpRequests, m.starts)
	if o, ok := st.(store.StartObserver); ok {
		o.ObserveStarts(m.observeStart)
	}
	// The pool of either store (go_sql_*: open, in use, idle, waits and time waited).
	if d, ok := st.(interface{ DB() *sql.DB }); ok {
		reg.MustRegister(collectors.NewDBStatsCollector(d.DB(), "hangar"))
	}
	return m
}

func (m *opsMetrics) observeStart(s store.StartSeen) {
	d := s.RunningAt.Sub(s.RequestedAt)
	if d < 0 {
		d = 0 // clocks of two replicas a little apart
	}
	m.starts.WithLabelValues(s.Backend).Observe(d.Seconds())
}

// knownMethods bound the method label.
var knownMethods = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true}

// instrument counts and times every request next serves. The route is the pattern the server's mux
// matched (set on the request as it routes), "app" for a workspace's app, "none" for what matched
// no pattern: the label stays bounded whatever paths clients send.
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		route := "none"
		switch {
		case r.Pattern != "":
			route = r.Pattern
			if _, path, ok := strings.Cut(route, " "); ok {
				route = path // the method is a label of its own
			}
		case s.apps.serves(r):
			route = "app"
		}
		method := r.Method
		if !knownMethods[method] {
			method = "other"
		}
		code := strconv.Itoa(rec.status())
		s.ops.httpDuration.WithLabelValues(method, route, code).Observe(time.Since(start).Seconds())
		s.ops.httpRequests.WithLabelValues(method, route, code).Inc()
	})
}

// statusRecorder notes the status code a handler answers with; it passes flushes and hijacks
// through (build logs, the event stream, WebSockets).
type statusRecorder struct {
	http.ResponseWriter
	code     int
	hijacked bool
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.code == 0 && code >= 200 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusRecorder) status() int {
	switch {
	case w.hijacked && w.code == 0:
		return http.StatusSwitchingProtocols
	case w.code == 0:
		return http.StatusOK
	}
	return w.code
}

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush serves handlers that assert http.Flusher.
func (w *statusRecorder) Flush() {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack serves callers that assert http.Hijacker.
func (w *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.hijacked = true
	}
	return c, rw, err
}
