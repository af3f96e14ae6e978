// Package opsserver is the operations listener of the agent and the access proxy: /healthz (the
// process serves), /readyz (it can do its work, else 503 with the reason) and /metrics (Prometheus).
// The server serves the same three paths on its API listener (internal/server).
package opsserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves /healthz, /readyz and /metrics. ready returns nil when the component is ready,
// else why not (the 503's body).
func Handler(reg prometheus.Gatherer, ready func() error) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// Server is a running operations listener.
type Server struct {
	srv  *http.Server
	addr net.Addr
	done chan struct{}
}

// Listen starts serving Handler(reg, ready) on addr (flag names the option, for errors). An empty
// addr serves nothing and returns nil.
func Listen(flag, addr string, reg prometheus.Gatherer, ready func() error, log *slog.Logger) (*Server, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	s := &Server{srv: &http.Server{Handler: Handler(reg, ready), ReadHeaderTimeout: 10 * time.Second}, addr: ln.Addr(), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener failed", "err", err)
		}
	}()
	log.Info("metrics listening", "addr", s.addr.String())
	return s, nil
}

// Addr is where the listener serves.
func (s *Server) Addr() net.Addr { return s.addr }

// Close stops serving. A nil *Server is closed.
func (s *Server) Close() {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	<-s.done
}
