package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// fakeServer answers the agent endpoints; cut decides, per reconcile request (0-based), whether the
// server breaks the connection instead of answering, as a response lost on its way would.
type fakeServer struct {
	mu    sync.Mutex
	types []protocol.UpdateType
	cut   func(n int) bool
	done  chan struct{}
	want  int
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case protocol.InfoPath:
		_ = json.NewEncoder(w).Encode(protocol.AgentInfo{ID: "a1", Name: "test",
			Settings: protocol.Settings{FullReconciliationIntervalSeconds: 3600, PartialReconciliationIntervalSeconds: 10}})
	case protocol.ReconcilePath:
		var req protocol.ReconcileRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		n := len(f.types)
		f.types = append(f.types, req.UpdateType)
		if len(f.types) == f.want {
			close(f.done)
		}
		f.mu.Unlock()
		if f.cut(n) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		_ = json.NewEncoder(w).Encode(protocol.ReconcileResponse{Settings: protocol.Settings{
			FullReconciliationIntervalSeconds: 3600, PartialReconciliationIntervalSeconds: 10}})
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeServer) seen() []protocol.UpdateType {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]protocol.UpdateType(nil), f.types...)
}

// now fires at once: the loop's intervals and backoffs pass without waiting.
func now(time.Duration) <-chan time.Time {
	c := make(chan time.Time, 1)
	c <- time.Time{}
	return c
}

func runLoop(t *testing.T, f *fakeServer) []protocol.UpdateType {
	t.Helper()
	srv := httptest.NewServer(f)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := New(Options{
		Server: &ServerClient{URL: srv.URL, Token: "t", HTTP: srv.Client()},
		Kube:   &Kube{Clientset: fake.NewClientset()}, After: now, WaitTimeout: -1,
	})
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	select {
	case <-f.done:
	case <-time.After(30 * time.Second): // a bound on a hang, not a timing assertion
		t.Fatalf("the agent sent only %v", f.seen())
	}
	cancel()
	if err := <-errc; err != context.Canceled {
		t.Fatalf("Run: %v", err)
	}
	return f.seen()[:f.want]
}

// A partial reconcile whose answer is lost is followed by a full one: the server has recorded that
// answer as given and would not send its configs again on a partial.
func TestLostAnswerMakesNextCycleFull(t *testing.T) {
	f := &fakeServer{cut: func(n int) bool { return n == 2 }, done: make(chan struct{}), want: 5}
	got := runLoop(t, f)
	want := []protocol.UpdateType{protocol.UpdateFull, protocol.UpdatePartial, protocol.UpdatePartial, protocol.UpdateFull, protocol.UpdatePartial}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("update types %v, want %v", got, want)
		}
	}
}

// Without failures the loop sends one full reconcile and then partial ones.
func TestLoopFullThenPartials(t *testing.T) {
	f := &fakeServer{cut: func(int) bool { return false }, done: make(chan struct{}), want: 4}
	got := runLoop(t, f)
	want := []protocol.UpdateType{protocol.UpdateFull, protocol.UpdatePartial, protocol.UpdatePartial, protocol.UpdatePartial}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("update types %v, want %v", got, want)
		}
	}
}

// A full reconcile that keeps failing keeps being retried as full, and the server-side failure of
// the first ones does not stop the loop.
func TestFailedFullIsRetriedAsFull(t *testing.T) {
	f := &fakeServer{cut: func(n int) bool { return n < 3 }, done: make(chan struct{}), want: 5}
	got := runLoop(t, f)
	want := []protocol.UpdateType{protocol.UpdateFull, protocol.UpdateFull, protocol.UpdateFull, protocol.UpdateFull, protocol.UpdatePartial}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("update types %v, want %v", got, want)
		}
	}
}
