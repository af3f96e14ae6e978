package opsserver

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The three endpoints over a real listener: /healthz always answers, /readyz says why it is not
// ready until it is, /metrics serves the registry.
func TestListenServesProbesAndMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "hangar_test_things_total", Help: "Things."})
	reg.MustRegister(c)
	c.Add(3)
	var ready atomic.Bool
	s, err := Listen("--metrics-listen", "127.0.0.1:0", reg, func() error {
		if !ready.Load() {
			return errors.New("caches not synced")
		}
		return nil
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + s.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "not ready: caches not synced") {
		t.Fatalf("/readyz before ready: %d %q", code, body)
	}
	ready.Store(true)
	if code, body := get("/readyz"); code != 200 {
		t.Fatalf("/readyz when ready: %d %q", code, body)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "hangar_test_things_total 3") {
		t.Fatalf("/metrics: %d\n%s", code, body)
	}
}

func TestListenEmptyServesNothingAndBadAddressNamesTheFlag(t *testing.T) {
	s, err := Listen("--metrics-listen", "", prometheus.NewRegistry(), func() error { return nil }, slog.Default())
	if s != nil || err != nil {
		t.Fatalf("empty address: %v %v", s, err)
	}
	s.Close() // a nil server closes
	if _, err := Listen("--metrics-listen", "not an address", prometheus.NewRegistry(), func() error { return nil }, slog.Default()); err == nil || !strings.Contains(err.Error(), "--metrics-listen") {
		t.Fatalf("bad address: %v", err)
	}
}
