package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/store/postgres"
	"github.com/hangar-dev/hangar/internal/testutil/pgtest"
)

// deadline bounds every wait of these tests for a failure; a passing test never reaches it.
const deadline = 10 * time.Second

// fakeTimers is a server's Options.After: a call says that a wait blocks (started, with its timeout)
// and returns fire, which the test sends on to time the wait out.
type fakeTimers struct {
	started chan time.Duration
	fire    chan time.Time
}

func newFakeTimers() *fakeTimers {
	return &fakeTimers{started: make(chan time.Duration, 16), fire: make(chan time.Time)}
}

func (f *fakeTimers) option(o *server.Options) {
	o.After = func(d time.Duration) <-chan time.Time { f.started <- d; return f.fire }
}

// blocked waits until a wait blocks (found nothing pending) and returns its timeout.
func (f *fakeTimers) blocked(t testing.TB) time.Duration {
	t.Helper()
	select {
	case d := <-f.started:
		return d
	case <-time.After(deadline):
		t.Fatal("no wait blocked")
		return 0
	}
}

// expire times out the blocked wait.
func (f *fakeTimers) expire(t testing.TB) {
	t.Helper()
	select {
	case f.fire <- time.Now():
	case <-time.After(deadline):
		t.Fatal("no wait took its timeout")
	}
}

type waitResult struct {
	status int
	resp   protocol.WaitResponse
	body   string
	err    error
}

// startWait sends GET /api/v1/agent/wait<query> and returns a channel with the result.
func startWait(ctx context.Context, url, token, query string) <-chan waitResult {
	out := make(chan waitResult, 1)
	go func() {
		var r waitResult
		defer func() { out <- r }()
		req, err := http.NewRequestWithContext(ctx, "GET", url+protocol.WaitPath+query, nil)
		if err != nil {
			r.err = err
			return
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			r.err = err
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		r.status, r.body, r.err = resp.StatusCode, string(b), err
		if err == nil && resp.StatusCode == 200 {
			r.err = json.Unmarshal(b, &r.resp)
		}
	}()
	return out
}

// answered waits for a wait's result and fails unless it is 200 with the given pending.
func answered(t testing.TB, ch <-chan waitResult, pending bool) {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil || r.status != 200 || r.resp.Pending != pending {
			t.Fatalf("wait answered %d %s (err %v), want 200 pending %v", r.status, r.body, r.err, pending)
		}
	case <-time.After(deadline):
		t.Fatalf("the wait did not answer (want pending %v)", pending)
	}
}

// metricValue reads one sample (name with labels, as exposed) from a server's /metrics.
func metricValue(t testing.TB, url, sample string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			return v
		}
	}
	return ""
}

// eventually waits until cond holds: for what the server learns asynchronously (a client that went
// away).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	timeout := time.After(deadline)
	for !cond() {
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestWaitForChanges(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			timers := newFakeTimers()
			env := servertest.NewWith(t, engine, timers.option)
			ctx := t.Context()
			agent := createAgent(t, env, "k1", nil)
			createAgent(t, env, "k2", nil)
			user := createUser(t, env, "dev")
			mustCall(t, env, user, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "agent": "k1"}, 201, nil)
			mustCall(t, env, user, "POST", "/api/v1/workspaces", map[string]any{"name": "x", "agent": "k2"}, 201, nil)
			answer := func() {
				t.Helper()
				env.Clock.Advance(time.Minute)
				reconcileCall(t, env, agent, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
			}

			// A workspace never answered: pending at once, without blocking.
			answered(t, startWait(ctx, env.URL, agent, "?timeout_seconds=60"), true)
			if len(timers.started) != 0 {
				t.Fatal("a wait with something pending blocked")
			}

			// Answered: the wait blocks until a stop through the API wakes it.
			answer()
			got := startWait(ctx, env.URL, agent, "?timeout_seconds=60")
			if d := timers.blocked(t); d != 60*time.Second {
				t.Errorf("timeout %v, want 60s", d)
			}
			mustCall(t, env, user, "PATCH", "/api/v1/workspaces/w", map[string]string{"desired_state": "Stopped"}, 200, nil)
			answered(t, got, true)

			// Another agent's changes do not end the wait; its timeout (default 30 s) does, with
			// pending false.
			answer()
			got = startWait(ctx, env.URL, agent, "")
			if d := timers.blocked(t); d != 30*time.Second {
				t.Errorf("default timeout %v, want 30s", d)
			}
			mustCall(t, env, user, "PATCH", "/api/v1/workspaces/x", map[string]string{"desired_state": "Stopped"}, 200, nil)
			mustCall(t, env, user, "POST", "/api/v1/workspaces", map[string]any{"name": "y", "agent": "k2"}, 201, nil)
			timers.expire(t)
			answered(t, got, false)

			// A start after a stop, through the API, while blocked: pending.
			got = startWait(ctx, env.URL, agent, "?timeout_seconds=1")
			if d := timers.blocked(t); d != time.Second {
				t.Errorf("timeout %v, want 1s", d)
			}
			mustCall(t, env, user, "PATCH", "/api/v1/workspaces/w", map[string]string{"desired_state": "Running"}, 200, nil)
			answered(t, got, true)
			answer()

			// The agent goes away: the wait ends, is counted canceled, and leaves no subscription.
			cctx, cancel := context.WithCancel(ctx)
			got = startWait(cctx, env.URL, agent, "")
			timers.blocked(t)
			cancel()
			if r := <-got; r.err == nil {
				t.Fatalf("a canceled wait answered %d %s", r.status, r.body)
			}
			subs := env.Store.(interface{ Subscribers() int })
			eventually(t, "the canceled wait to end", func() bool {
				return metricValue(t, env.URL, `hangar_agent_waits_total{result="canceled"}`) == "1" && subs.Subscribers() == 0
			})

			for sample, want := range map[string]string{
				`hangar_agent_waits_total{result="pending"}`: "3",
				`hangar_agent_waits_total{result="timeout"}`: "1",
				"hangar_agent_waiters":                       "0",
			} {
				if got := metricValue(t, env.URL, sample); got != want {
					t.Errorf("%s = %q, want %s", sample, got, want)
				}
			}
		})
	}
}

func TestWaitRefusals(t *testing.T) {
	env := servertest.New(t)
	agent := createAgent(t, env, "k1", nil)
	user := createUser(t, env, "dev")
	for _, v := range []string{"0", "61", "-1", "abc", "1.5", "30s", "99999999999999999999"} {
		status, body := call(t, env, agent, "GET", protocol.WaitPath+"?timeout_seconds="+v, nil)
		if e := apiError(t, body); status != 400 || len(e.Validations) != 1 || e.Validations[0].Field != "timeout_seconds" {
			t.Errorf("timeout_seconds=%s: %d %s, want 400 naming timeout_seconds", v, status, body)
		}
	}
	for name, token := range map[string]string{"user token": user, "no token": "", "unknown agent token": "hga_nope"} {
		if status, body := call(t, env, token, "GET", protocol.WaitPath+"?timeout_seconds=1", nil); status != 401 {
			t.Errorf("%s: %d %s, want 401", name, status, body)
		}
	}
}

// TestWaitEndsOnShutdown: a graceful shutdown of the http.Server answers blocked waits at once
// (pending false) instead of waiting out their timeout.
func TestWaitEndsOnShutdown(t *testing.T) {
	timers := newFakeTimers()
	env := servertest.NewWith(t, "sqlite", timers.option)
	agent := createAgent(t, env, "k1", nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: env.Server.Handler()}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	url := "http://" + ln.Addr().String()
	got := startWait(t.Context(), url, agent, "?timeout_seconds=60")
	timers.blocked(t)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with a blocked wait: %v", err)
	}
	answered(t, got, false)
	if err := <-served; err != http.ErrServerClosed {
		t.Fatalf("serve: %v", err)
	}
	if got := metricValue(t, env.URL, `hangar_agent_waits_total{result="canceled"}`); got != "1" {
		t.Errorf("canceled waits %q, want 1", got)
	}
}

// replicaPair starts two servers on one Postgres database, each with its own store (connection
// pool and LISTEN connection), as two replicas are; opts apply to b. The admin is bootstrapped
// through a.
func replicaPair(t testing.TB, opts ...servertest.Option) (a, b *servertest.Env) {
	t.Helper()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	clk := clock.NewFake(servertest.Start)
	var envs [2]*servertest.Env
	for i := range envs {
		st, err := postgres.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		o := server.Options{Store: st, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		if i == 1 {
			for _, opt := range opts {
				opt(&o)
			}
		}
		srv := server.New(o)
		hs := httptest.NewServer(srv.Handler())
		t.Cleanup(hs.Close)
		envs[i] = &servertest.Env{URL: hs.URL, Clock: clk, Store: st, Server: srv, DataDir: t.TempDir()}
	}
	path, created, err := envs[0].Server.Bootstrap(ctx, envs[0].DataDir)
	if err != nil || !created {
		t.Fatalf("bootstrap: %v %v", created, err)
	}
	token, err := readFile(path)
	if err != nil {
		t.Fatal(err)
	}
	envs[0].AdminToken, envs[1].AdminToken = token, token
	return envs[0], envs[1]
}

// TestWaitAcrossReplicas: a stop through replica a wakes a wait on replica b (Postgres
// LISTEN/NOTIFY), and another agent's change through a does not end it.
func TestWaitAcrossReplicas(t *testing.T) {
	timers := newFakeTimers()
	a, b := replicaPair(t, timers.option)
	agent := createAgent(t, a, "k1", nil)
	createAgent(t, a, "k2", nil)
	user := createUser(t, a, "dev")
	mustCall(t, a, user, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "agent": "k1"}, 201, nil)
	a.Clock.Advance(time.Minute)
	reconcileCall(t, a, agent, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})

	got := startWait(t.Context(), b.URL, agent, "?timeout_seconds=60")
	timers.blocked(t)
	mustCall(t, a, user, "PATCH", "/api/v1/workspaces/w", map[string]string{"desired_state": "Stopped"}, 200, nil)
	answered(t, got, true)

	a.Clock.Advance(time.Minute)
	reconcileCall(t, b, agent, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
	got = startWait(t.Context(), b.URL, agent, "?timeout_seconds=60")
	timers.blocked(t)
	mustCall(t, a, user, "POST", "/api/v1/workspaces", map[string]any{"name": "x", "agent": "k2"}, 201, nil)
	timers.expire(t)
	answered(t, got, false)
}

// BenchmarkWaitWakeup measures how long a user's desired-state change takes to reach an agent's
// blocked wait: from sending the PATCH to the wait's answer, over real HTTP on loopback. The
// "replicas" case waits on another server (its own store and LISTEN connection) than the one the
// PATCH goes to. It reports the median and the 95th percentile (µs) besides ns/op, and the median of
// the PATCH's own round trip, which the wake-up includes.
func BenchmarkWaitWakeup(b *testing.B) {
	for _, engine := range []string{"sqlite", "postgres", "postgres-replicas"} {
		b.Run(engine, func(b *testing.B) {
			timers := newFakeTimers()
			var patchEnv, waitEnv *servertest.Env
			if engine == "postgres-replicas" {
				patchEnv, waitEnv = replicaPair(b, timers.option)
			} else {
				patchEnv = servertest.NewWith(b, engine, timers.option)
				waitEnv = patchEnv
			}
			agent := createAgent(b, patchEnv, "k1", nil)
			user := createUser(b, patchEnv, "dev")
			mustCall(b, patchEnv, user, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "agent": "k1"}, 201, nil)
			ctx := context.Background()
			states := [2]string{"Stopped", "Running"}
			lat := make([]time.Duration, 0, b.N)
			patch := make([]time.Duration, 0, b.N) // the PATCH's own round trip, for comparison
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				patchEnv.Clock.Advance(time.Minute)
				reconcileCall(b, patchEnv, agent, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
				got := startWait(ctx, waitEnv.URL, agent, "?timeout_seconds=60")
				timers.blocked(b)
				b.StartTimer()
				start := time.Now()
				mustCall(b, patchEnv, user, "PATCH", "/api/v1/workspaces/w", map[string]string{"desired_state": states[i%2]}, 200, nil)
				patch = append(patch, time.Since(start))
				answered(b, got, true)
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			slices.Sort(patch)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "median-µs")
			b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds()), "p95-µs")
			b.ReportMetric(float64(patch[len(patch)/2].Microseconds()), "patch-median-µs")
		})
	}
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}
