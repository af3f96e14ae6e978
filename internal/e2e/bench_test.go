package e2e

// Benchmarks of the whole system (issue 3, item 11; figures in docs/benchmarks.md): the real
// `hangar` binary as server and agent on the kubetest cluster. They run only with -bench:
//
//	CGO_ENABLED=0 go test -run '^$' -bench . -benchtime 1x -timeout 30m ./internal/e2e
//
// Each benchmark reports its latencies as custom metrics (p50-ms, p95-ms, …: nearest-rank
// percentiles over all runs of all b.N iterations) and suppresses ns/op, which would only time the
// whole series. HANGAR_BENCH_WORKSPACES changes the 1,000 of BenchmarkAgent1000Workspaces (for a
// quick try) and HANGAR_BENCH_STORAGE=ephemeral its workspaces' data volume to an emptyDir (no
// claims); HANGAR_BENCH_LEADER_ELECTION=0 runs its agent without leader election, and
// HANGAR_BENCH_AGENT_FLAGS adds flags to its command line (e.g. "--kube-qps 100").

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

const (
	// benchRuns is how many measured transitions a latency benchmark makes per b.N iteration.
	benchRuns = 20
	// benchIntervalOnlyRuns is the same for the agent that cannot use the wait endpoint: each of its
	// runs takes about a partial interval (10 s) to stop and as much again to start.
	benchIntervalOnlyRuns = 10
	// benchPoll is how often the benchmarks read the API while waiting for a state.
	benchPoll = 5 * time.Millisecond
)

// BenchmarkCreateToRunning: a new workspace, from POST /api/v1/workspaces returning to the API
// showing it Running (the default agent: 10 s partial interval, wait endpoint). One workspace at a
// time; a first one, not counted, warms the agent up (discovery, first apply).
func BenchmarkCreateToRunning(b *testing.B) {
	cluster := kubetest.Start(b)
	srv := startServer(b)
	tok := srv.registerAgent(b, "bench-create", "")
	startAgent(b, srv, cluster, "bench-create", tok, "hangar-agent-bench-create")
	c := srv.client(b, srv.AdminToken)
	ctx := context.Background()

	create := func(name string) time.Duration {
		if _, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: name, Agent: "bench-create"}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		benchWaitFast(b, c, name, transition, "Running", state("Running", "Running"))
		return time.Since(start)
	}
	b.Logf("warm-up create → Running: %v", create("bc-warm").Round(time.Millisecond))
	var samples []time.Duration
	for i := 0; i < b.N; i++ {
		for j := 0; j < benchRuns; j++ {
			benchPause()
			samples = append(samples, create(fmt.Sprintf("bc-%d-%02d", i, j)))
		}
	}
	benchReport(b, "", samples)
}

// BenchmarkStopToStopped: a Running workspace, from PATCH desired_state=Stopped returning to the
// API showing it Stopped; it is started again between runs (start → Running is reported too, as
// start-p50-ms and start-p95-ms).
func BenchmarkStopToStopped(b *testing.B) {
	cluster := kubetest.Start(b)
	srv := startServer(b)
	tok := srv.registerAgent(b, "bench-stop", "")
	startAgent(b, srv, cluster, "bench-stop", tok, "hangar-agent-bench-stop")
	c := srv.client(b, srv.AdminToken)
	ctx := context.Background()
	if _, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "bs", Agent: "bench-stop"}); err != nil {
		b.Fatal(err)
	}
	benchWaitFast(b, c, "bs", transition, "Running", state("Running", "Running"))

	to := func(desired string) time.Duration {
		if _, err := c.UpdateWorkspace(ctx, "bs", sdk.UpdateWorkspaceRequest{DesiredState: desired}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		benchWaitFast(b, c, "bs", transition, desired, state(desired, desired))
		return time.Since(start)
	}
	var stops, starts []time.Duration
	for i := 0; i < b.N; i++ {
		for j := 0; j < benchRuns; j++ {
			benchPause()
			stops = append(stops, to("Stopped"))
			benchPause()
			starts = append(starts, to("Running"))
		}
	}
	benchReport(b, "", stops)
	benchReport(b, "start-", starts)
}

// BenchmarkStopApplied: from PATCH desired_state=Stopped returning to the workspace's Deployment
// having spec.replicas 0 in the cluster (seen through a watch), with the agent woken by the wait
// endpoint, and with an agent whose server answers 404 to the wait endpoint, so that it falls back
// to its periodic partial reconciles (the default 10 s interval): that agent reaches the server
// through a small reverse proxy in this process which answers 404 there and forwards the rest.
//
// The interval-only agent's latency depends on where in its 10 s period the PATCH falls, so each run
// first waits a uniformly random 0–10 s (0–1 s for the agent with the wait endpoint, which does not
// depend on that phase).
func BenchmarkStopApplied(b *testing.B) {
	cluster := kubetest.Start(b)
	srv := startServer(b)
	b.Run("wait-endpoint", func(b *testing.B) {
		benchStopApplied(b, cluster, srv, "bench-wait", false, benchRuns, time.Second)
	})
	b.Run("interval-only-10s", func(b *testing.B) {
		benchStopApplied(b, cluster, srv, "bench-nowait", true, benchIntervalOnlyRuns, 10*time.Second)
	})
}

func benchStopApplied(b *testing.B, cluster *kubetest.Cluster, srv *server, name string, blockWait bool, runs int, maxPause time.Duration) {
	ctx := context.Background()
	serverURL := srv.URL
	if blockWait {
		serverURL = benchAgentProxy(b, srv.URL)
	}
	tok := srv.registerAgent(b, name, "")
	agent := start(b, "agent "+name, []string{"HANGAR_LOG_LEVEL=debug"}, "agent", "--server", serverURL, "--token-file", tok,
		"--kubeconfig", cluster.Kubeconfig, "--lease-namespace", "hangar-agent-"+name, "--identity", name)
	c := srv.client(b, srv.AdminToken)
	ws, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: name, Agent: name})
	if err != nil {
		b.Fatal(err)
	}
	benchWaitFast(b, c, name, transition, "Running", state("Running", "Running"))
	if blockWait {
		kubetest.Eventually(b, 30*time.Second, "the agent to give up the wait endpoint", func(context.Context) error {
			if strings.Contains(agent.output(), "the server has no wait endpoint") {
				return nil
			}
			return fmt.Errorf("the agent did not log that the server has no wait endpoint")
		})
	}
	deployments := cluster.Client.AppsV1().Deployments(ws.Namespace)

	var samples []time.Duration
	for i := 0; i < b.N; i++ {
		for j := 0; j < runs; j++ {
			time.Sleep(rand.N(maxPause))
			d, err := deployments.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				b.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, transition)
			seen := make(chan time.Time, 1)
			go func() {
				at, err := benchWatchReplicas(wctx, cluster, ws.Namespace, name, d.ResourceVersion, 0)
				if err != nil {
					at = time.Time{}
				}
				seen <- at
			}()
			if _, err := c.UpdateWorkspace(ctx, name, sdk.UpdateWorkspaceRequest{DesiredState: "Stopped"}); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			at := <-seen
			cancel()
			if at.IsZero() {
				b.Fatalf("run %d: the Deployment did not get spec.replicas 0 within %v", j, transition)
			}
			samples = append(samples, max(at.Sub(start), 0))
			benchWaitFast(b, c, name, transition, "Stopped", state("Stopped", "Stopped"))
			if _, err := c.UpdateWorkspace(ctx, name, sdk.UpdateWorkspaceRequest{DesiredState: "Running"}); err != nil {
				b.Fatal(err)
			}
			benchWaitFast(b, c, name, transition, "Running", state("Running", "Running"))
		}
	}
	benchReport(b, "", samples)
	b.Log(benchProblems("agent "+name, agent.output()))
}

// benchWatchReplicas waits until the Deployment has spec.replicas want, watching from resourceVersion
// rv, and returns when this process saw it.
func benchWatchReplicas(ctx context.Context, cluster *kubetest.Cluster, ns, name, rv string, want int32) (time.Time, error) {
	for {
		w, err := cluster.Client.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: rv})
		if err != nil {
			return time.Time{}, err
		}
		for ev := range w.ResultChan() {
			now := time.Now()
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok || ev.Type == watch.Error {
				continue
			}
			rv = d.ResourceVersion
			if d.Spec.Replicas != nil && *d.Spec.Replicas == want {
				w.Stop()
				return now, nil
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return time.Time{}, ctx.Err()
		}
	}
}

// benchAgentProxy serves the server's API at a new URL, but answers 404 to the wait endpoint, as a
// server without it would.
func benchAgentProxy(b *testing.B, target string) string {
	u, err := url.Parse(target)
	if err != nil {
		b.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if r.Context().Err() == nil {
			b.Logf("proxy: %s %s: %v", r.Method, r.URL.Path, err)
		}
		w.WriteHeader(http.StatusBadGateway)
	}
	ps := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == protocol.WaitPath {
			http.NotFound(w, r)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	b.Cleanup(ps.Close)
	return ps.URL
}

// BenchmarkAgent1000Workspaces: one agent with 1,000 workspaces (per-workspace namespaces and every
// other setting at its default: partial reconcile every 10 s, full every hour). It creates them
// through the API (8 requests at a time), waits until all are Running, watches the steady state for
// 100 s, restarts the agent three times (a full reconcile starts every run of the loop; each is what
// the hourly one costs), and stops 100 of them at once. It reports the agent's cycle times (from its
// debug log `reconciled … took=…`) and its memory (VmRSS, VmHWM from /proc/PID/status).
//
// The agent runs with leader election, as by default. Before the Lease got a client (rate limiter)
// of its own and applies a concurrency cap, the burst of 1,000 creations never converged with it
// (docs/benchmarks.md, problem 1); HANGAR_BENCH_LEADER_ELECTION=0 runs it without.
//
// The kubetest node runs at most 110 pods, so the benchmark adds a second fake node for 1,100. It
// leaves its workspaces in the cluster (kubetest's own cluster is thrown away after the tests).
func BenchmarkAgent1000Workspaces(b *testing.B) {
	n := 1000
	if v := os.Getenv("HANGAR_BENCH_WORKSPACES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("HANGAR_BENCH_WORKSPACES=%q", v)
		}
	}
	// HANGAR_BENCH_STORAGE=ephemeral: the default devfile with its data volume an emptyDir, so that
	// no claim waits on kube-controller-manager's volume binder, which binds one claim at a time
	// (its claim worker "must run only once") and so sets the pace of a burst of persistent ones.
	devfileText := ""
	switch v := os.Getenv("HANGAR_BENCH_STORAGE"); v {
	case "", "persistent":
	case "ephemeral":
		devfileText = strings.Replace(string(devfile.Default()), "components:",
			"attributes:\n  controller.devfile.io/storage-type: ephemeral\ncomponents:", 1)
	default:
		b.Fatalf("HANGAR_BENCH_STORAGE=%q: persistent (the default) or ephemeral", v)
	}
	leaseNS := "hangar-agent-bench-1k"
	if os.Getenv("HANGAR_BENCH_LEADER_ELECTION") == "0" {
		leaseNS = ""
	}
	const (
		steady   = 100 * time.Second
		restarts = 3
	)
	ctx := context.Background()
	cluster := kubetest.Start(b)
	benchAddNode(b, cluster, "kwok-bench-0", n+100)
	srv := startServer(b)
	tok := srv.registerAgent(b, "bench-1k", "")
	startBenchAgent := func() *proc {
		args := []string{"agent", "--server", srv.URL, "--token-file", tok,
			"--kubeconfig", cluster.Kubeconfig, "--lease-namespace", leaseNS, "--identity", "bench-1k"}
		return start(b, "agent bench-1k", []string{"HANGAR_LOG_LEVEL=debug"}, append(args, strings.Fields(os.Getenv("HANGAR_BENCH_AGENT_FLAGS"))...)...)
	}
	agent := startBenchAgent()
	c := srv.client(b, srv.AdminToken)
	mem := benchSampleMemory(b, agent.cmd.Process.Pid, time.Second)
	tl := startBenchTimeline(b, cluster, func(ns string) bool { return strings.HasPrefix(ns, "hangar-k") })
	var outputs []string // of the agents restarted

	for iter := 0; iter < b.N; iter++ {
		prefix := fmt.Sprintf("k%d-", iter)
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("%s%04d", prefix, i)
		}
		logStart := len(agent.output())
		begin := time.Now()
		tl.reset(begin)
		benchParallel(b, names, 8, func(name string) error {
			_, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: name, Agent: "bench-1k", Devfile: devfileText})
			return err
		})
		created := time.Since(begin)
		b.Logf("%d workspaces created through the API in %v (%.0f/s)", n, created.Round(time.Millisecond), float64(n)/created.Seconds())
		reached := benchWaitAll(b, c, prefix, n, 2*time.Second, 25*time.Minute, "Running", state("Running", "Running"))
		allRunning := reached[2].Sub(begin)
		b.Logf("Running after the first create: the first %v, half %v, all %v (read every 2 s)",
			reached[0].Sub(begin).Round(time.Second), reached[1].Sub(begin).Round(time.Second), allRunning.Round(time.Second))
		ramp := agent.output()[logStart:]
		rampRSS := mem.max()
		b.Logf("the cluster's pipeline during the ramp: %s", tl.report(benchCreateSteps))

		logStart = len(agent.output())
		mem.reset()
		time.Sleep(steady)
		steadyLog := agent.output()[logStart:]
		steadyRSS := mem.max()
		status := benchProcStatus(b, agent.cmd.Process.Pid)
		serverStatus := benchProcStatus(b, srv.cmd.Process.Pid)
		b.Logf("memory: agent VmRSS %s, VmHWM %s, largest VmRSS sampled (every second) during the ramp %.0f MB, during the steady state %.0f MB; server VmRSS %s, VmHWM %s; cluster %s",
			status["VmRSS"], status["VmHWM"], rampRSS, steadyRSS, serverStatus["VmRSS"], serverStatus["VmHWM"], benchClusterRSS(cluster))

		// Restarts: the first cycle of each run is a full reconcile with a new informer.
		var fulls, toFull []time.Duration
		var restartedRSS []string
		for range restarts {
			agent.stop(syscall.SIGTERM)
			outputs = append(outputs, agent.output())
			startedAt := time.Now()
			agent = startBenchAgent()
			var full benchCycleTimes
			kubetest.Eventually(b, transition, "the restarted agent's first full reconcile", func(context.Context) error {
				if full = benchCycles(agent.output()); len(full.full) == 0 {
					return fmt.Errorf("no full reconcile logged yet")
				}
				return nil
			})
			toFull = append(toFull, time.Since(startedAt))
			fulls = append(fulls, full.full[0])
			time.Sleep(20 * time.Second)
			st := benchProcStatus(b, agent.cmd.Process.Pid)
			restartedRSS = append(restartedRSS, "VmRSS "+st["VmRSS"]+" VmHWM "+st["VmHWM"])
		}
		b.Logf("after a restart: full reconcile took %v; start → first full reconcile logged %v; agent memory 20 s later: %s",
			benchDurations(fulls), benchDurations(toFull), strings.Join(restartedRSS, "; "))

		// A tenth stopped at once.
		stopN := max(n/10, 1)
		logStart = len(agent.output())
		begin = time.Now()
		tl.reset(begin)
		benchParallel(b, names[:stopN], 8, func(name string) error {
			_, err := c.UpdateWorkspace(ctx, name, sdk.UpdateWorkspaceRequest{DesiredState: "Stopped"})
			return err
		})
		stopped := benchWaitAll(b, c, prefix, stopN, 250*time.Millisecond, 5*time.Minute, "Stopped", state("Stopped", "Stopped"))[2].Sub(begin)
		stopLog := agent.output()[logStart:]
		b.Logf("the cluster's pipeline during the stop: %s", tl.report(benchStopSteps))

		rampCycles, steadyCycles, stopCycles := benchCycles(ramp), benchCycles(steadyLog), benchCycles(stopLog)
		b.Logf("ramp (create → all Running): %s", rampCycles)
		b.Logf("steady state (%v): %s", steady, steadyCycles)
		b.Logf("stop %d at once: all Stopped in %v (read every 250 ms); %s", stopN, stopped.Round(time.Millisecond), stopCycles)

		b.ReportMetric(float64(n), "workspaces")
		b.ReportMetric(allRunning.Seconds(), "all-running-s")
		b.ReportMetric(benchMs(benchPercentile(steadyCycles.partial, 0.5)), "partial-p50-ms")
		b.ReportMetric(benchMs(benchPercentile(steadyCycles.partial, 0.95)), "partial-p95-ms")
		b.ReportMetric(benchMs(benchPercentile(fulls, 0.5)), "full-p50-ms")
		b.ReportMetric(benchMs(slices.Max(fulls)), "full-max-ms")
		b.ReportMetric(benchMs(slices.Max(append([]time.Duration{0}, rampCycles.partial...))), "ramp-partial-max-ms")
		b.ReportMetric(steadyRSS, "rss-MB")
		b.ReportMetric(benchKB(status["VmHWM"])/1024, "hwm-MB")
		b.ReportMetric(stopped.Seconds(), "stop-tenth-s")
		b.ReportMetric(float64(steadyCycles.requests), "steady-kube-requests")
		b.ReportMetric(float64(stopCycles.requests), "stop-tenth-kube-requests")
		b.ReportMetric(float64(rampCycles.requests), "ramp-kube-requests")
	}
	b.ReportMetric(0, "ns/op")
	b.Logf("%s; %s", benchProblems("agent", strings.Join(append(outputs, agent.output()), "")), benchProblems("server", srv.output()))
}

// benchClusterRSS is the VmRSS of each part of a cluster kube-up started (listed in DIR/pids).
func benchClusterRSS(cluster *kubetest.Cluster) string {
	data, err := os.ReadFile(filepath.Join(filepath.Dir(cluster.Kubeconfig), "pids"))
	if err != nil {
		return "(no pids file)"
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		pid, name, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if st, err := os.ReadFile("/proc/" + pid + "/status"); err == nil {
			for _, l := range strings.Split(string(st), "\n") {
				if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
					out = append(out, fmt.Sprintf("%s %.0f MB", name, benchKB(v)/1024))
				}
			}
		}
	}
	return strings.Join(out, ", ")
}

func benchDurations(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.Round(time.Millisecond).String()
	}
	return strings.Join(s, ", ")
}

// benchAddNode adds a fake node (kwok runs its pods) for pods pods and waits until it takes them.
func benchAddNode(b *testing.B, cluster *kubetest.Cluster, name string, pods int) {
	rl := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1000"),
		corev1.ResourceMemory: resource.MustParse("4Ti"),
		corev1.ResourcePods:   *resource.NewQuantity(int64(pods), resource.DecimalSI),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels:      map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "kwok"},
		},
		// Tainted as the cluster's own kwok node is, so that only what tolerates it (the
		// benchmarks' agents) lands here, never a test's workspace meant for the real node.
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: kubetest.KwokTaint, Value: "fake", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Allocatable: rl, Capacity: rl},
	}
	if _, err := cluster.Client.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	kubetest.Eventually(b, 60*time.Second, "node "+name+" to be Ready with only the kwok taint", func(ctx context.Context) error {
		n, err := cluster.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue && len(n.Spec.Taints) == 1 {
				return nil
			}
		}
		return fmt.Errorf("conditions %v, taints %v", n.Status.Conditions, n.Spec.Taints)
	})
}

// benchParallel runs f on every name, workers at a time; the first error fails the benchmark.
func benchParallel(b *testing.B, names []string, workers int, f func(string) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(names) {
					return
				}
				if err := f(names[i]); err != nil {
					errs <- fmt.Errorf("%s: %w", names[i], err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// benchWaitAll lists the workspaces every poll until want of those named prefix… satisfy cond, and
// returns when it saw the first, half of them, and all; with -v it logs the states every 30 s.
func benchWaitAll(b *testing.B, c *sdk.Client, prefix string, want int, poll, timeout time.Duration, what string, cond func(sdk.Workspace) bool) [3]time.Time {
	var reached [3]time.Time
	deadline := time.Now().Add(timeout)
	lastLog := time.Now()
	var counts map[string]int
	for time.Now().Before(deadline) {
		list, err := c.ListWorkspaces(context.Background())
		if err == nil {
			done := 0
			counts = map[string]int{}
			for _, w := range list {
				if !strings.HasPrefix(w.Name, prefix) {
					continue
				}
				counts[w.DesiredState+"/"+w.ActualState]++
				if cond(w) {
					done++
				}
			}
			now := time.Now()
			for i, at := range []int{1, (want + 1) / 2, want} {
				if done >= at && reached[i].IsZero() {
					reached[i] = now
				}
			}
			if done >= want {
				return reached
			}
			if testing.Verbose() && time.Since(lastLog) > 30*time.Second {
				b.Logf("waiting for %d %s: %d are; %v", want, what, done, counts)
				lastLog = time.Now()
			}
		}
		time.Sleep(poll)
	}
	b.Fatalf("timed out after %v waiting for %d workspaces to be %s: %v", timeout, want, what, counts)
	return reached
}

// benchWaitFast is waitFor reading the API every benchPoll.
func benchWaitFast(b *testing.B, c *sdk.Client, name string, timeout time.Duration, what string, cond func(sdk.Workspace) bool) sdk.Workspace {
	deadline := time.Now().Add(timeout)
	var last sdk.Workspace
	var lastErr error
	for time.Now().Before(deadline) {
		w, err := c.Workspace(context.Background(), name)
		if err == nil {
			last = w
			if cond(w) {
				return w
			}
		}
		lastErr = err
		time.Sleep(benchPoll)
	}
	b.Fatalf("timed out after %v waiting for workspace %s to be %s; last seen desired=%s actual=%s error=%+v (%v)",
		timeout, name, what, last.DesiredState, last.ActualState, last.Error, lastErr)
	return last
}

// benchPause waits a random 0–500 benchMs, so that a run does not always start at the same point of the
// agent's activity after the previous one.
func benchPause() { time.Sleep(rand.N(500 * time.Millisecond)) }

// benchPercentile is the nearest-rank benchPercentile p (0 < p ≤ 1) of ds; 0 for none.
func benchPercentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func benchMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// benchReport reports p50, p95, mean and max in milliseconds, with prefix before each unit, and
// suppresses ns/op.
func benchReport(b *testing.B, prefix string, ds []time.Duration) {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	b.ReportMetric(float64(len(ds)), prefix+"runs")
	b.ReportMetric(benchMs(benchPercentile(ds, 0.5)), prefix+"p50-ms")
	b.ReportMetric(benchMs(benchPercentile(ds, 0.95)), prefix+"p95-ms")
	b.ReportMetric(benchMs(sum)/float64(max(len(ds), 1)), prefix+"mean-ms")
	b.ReportMetric(benchMs(slices.Max(append([]time.Duration{0}, ds...))), prefix+"max-ms")
	b.ReportMetric(0, "ns/op")
	rounded := make([]string, len(ds))
	for i, d := range ds {
		rounded[i] = d.Round(time.Millisecond).String()
	}
	b.Logf("%slatencies: %s", prefix, strings.Join(rounded, " "))
}

var (
	benchReconciled = regexp.MustCompile(`msg=reconciled .*update_type=(full|partial) took=(\S+)`)
	// benchKubeRequests reads the agent's count of Kubernetes API requests (watches aside) so far.
	benchKubeRequests = regexp.MustCompile(`msg=reconciled .* kube_requests=(\d+)`)
)

type benchCycleTimes struct {
	full, partial []time.Duration
	// requests is how many Kubernetes API requests (watches aside) the agent made from the first
	// cycle to the last of the log; -1 if it does not say.
	requests int64
}

func (c benchCycleTimes) String() string {
	f := func(ds []time.Duration) string {
		if len(ds) == 0 {
			return "none"
		}
		return fmt.Sprintf("%d, p50 %v, p95 %v, max %v", len(ds), benchPercentile(ds, 0.5).Round(10*time.Microsecond),
			benchPercentile(ds, 0.95).Round(10*time.Microsecond), slices.Max(ds).Round(10*time.Microsecond))
	}
	return fmt.Sprintf("full cycles: %s; partial cycles: %s; Kubernetes API requests between the first and the last cycle: %d",
		f(c.full), f(c.partial), c.requests)
}

// benchCycles reads the agent's `reconciled` debug lines.
func benchCycles(log string) benchCycleTimes {
	out := benchCycleTimes{requests: -1}
	first := int64(-1)
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if m := benchKubeRequests.FindStringSubmatch(sc.Text()); m != nil {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			if first < 0 {
				first = n
			}
			out.requests = n - first
		}
		m := benchReconciled.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		d, err := time.ParseDuration(m[2])
		if err != nil {
			continue
		}
		if m[1] == "full" {
			out.full = append(out.full, d)
		} else {
			out.partial = append(out.partial, d)
		}
	}
	return out
}

// benchProcStatus reads /proc/PID/status.
func benchProcStatus(b *testing.B, pid int) map[string]string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// benchKB reads "123 kB".
func benchKB(v string) float64 {
	f, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 64)
	return f
}

// benchMemSampler keeps the largest VmRSS (MB) of a process seen since the last reset.
type benchMemSampler struct {
	mu   sync.Mutex
	peak float64
}

func (m *benchMemSampler) max() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peak
}

func (m *benchMemSampler) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.peak = 0
}

func benchSampleMemory(b *testing.B, pid int, every time.Duration) *benchMemSampler {
	m := &benchMemSampler{}
	done := make(chan struct{})
	b.Cleanup(func() { close(done) })
	go func() {
		for {
			if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
				for _, line := range strings.Split(string(data), "\n") {
					if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
						mb := benchKB(v) / 1024
						m.mu.Lock()
						m.peak = max(m.peak, mb)
						m.mu.Unlock()
					}
				}
			}
			select {
			case <-done:
				return
			case <-time.After(every):
			}
		}
	}()
	return m
}

// benchProblems says how many warnings and errors a process printed, and the first few.
func benchProblems(name, out string) string {
	var warns, errs, throttled int
	var first []string
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, "client-side throttling"):
			throttled++
			continue
		case strings.Contains(line, "level=WARN"):
			warns++
		case strings.Contains(line, "level=ERROR") || strings.HasPrefix(line, "E"):
			errs++
		default:
			continue
		}
		if len(first) < 5 {
			first = append(first, line)
		}
	}
	msg := fmt.Sprintf("%s: %d warnings, %d errors, %d client-side throttling notes", name, warns, errs, throttled)
	if len(first) > 0 {
		msg += "; first: " + strings.Join(first, " | ")
	}
	return msg
}

// BenchmarkStop100AtOnce: 100 Running workspaces of one agent (default settings) are stopped at
// once (PATCHes 8 at a time). It reports when all 100 Deployments have spec.replicas 0 in the
// cluster (applied-s: the agent's part; the cluster read every 50 ms), when the API shows all 100
// Stopped (stopped-s: the pods are gone too; read every 250 ms), and the Kubernetes API requests
// the agent made meanwhile (kube-requests, from its log; -1 for an agent that does not log them).
func BenchmarkStop100AtOnce(b *testing.B) {
	const n = 100
	ctx := context.Background()
	cluster := kubetest.Start(b)
	benchAddNode(b, cluster, "kwok-bench-stop100", n+10) // the first node has CPU for 64 workspaces
	srv := startServer(b)
	tok := srv.registerAgent(b, "bench-stop100", "")
	agent := start(b, "agent bench-stop100", []string{"HANGAR_LOG_LEVEL=debug"}, "agent", "--server", srv.URL, "--token-file", tok,
		"--kubeconfig", cluster.Kubeconfig, "--lease-namespace", "hangar-agent-bench-stop100", "--identity", "bench-stop100")
	c := srv.client(b, srv.AdminToken)
	tl := startBenchTimeline(b, cluster, func(ns string) bool { return strings.HasPrefix(ns, "hangar-s") })
	for iter := 0; iter < b.N; iter++ {
		prefix := fmt.Sprintf("s%d-", iter)
		names := make([]string, n)
		namespaces := map[string]string{}
		for i := range names {
			names[i] = fmt.Sprintf("%s%03d", prefix, i)
		}
		var mu sync.Mutex
		benchParallel(b, names, 8, func(name string) error {
			w, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: name, Agent: "bench-stop100"})
			mu.Lock()
			namespaces[w.KubeName] = w.Namespace // the Deployment is named by the cluster name
			mu.Unlock()
			return err
		})
		benchWaitAll(b, c, prefix, n, 250*time.Millisecond, 3*time.Minute, "Running", state("Running", "Running"))
		time.Sleep(5 * time.Second) // let the ramp's last events settle

		logStart := len(agent.output())
		begin := time.Now()
		tl.reset(begin)
		benchParallel(b, names, 8, func(name string) error {
			_, err := c.UpdateWorkspace(ctx, name, sdk.UpdateWorkspaceRequest{DesiredState: "Stopped"})
			return err
		})
		patched := time.Since(begin)
		var applied time.Duration
		for applied == 0 {
			if time.Since(begin) > 5*time.Minute {
				b.Fatal("the Deployments did not all get spec.replicas 0 within 5 minutes")
			}
			list, err := cluster.Client.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
			if err != nil {
				b.Fatal(err)
			}
			zero := 0
			for _, d := range list.Items {
				if strings.HasPrefix(d.Name, prefix) && namespaces[d.Name] == d.Namespace && d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
					zero++
				}
			}
			if zero == n {
				applied = time.Since(begin)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		stopped := benchWaitAll(b, c, prefix, n, 250*time.Millisecond, 5*time.Minute, "Stopped", state("Stopped", "Stopped"))[2].Sub(begin)
		cycles := benchCycles(agent.output()[logStart:])
		b.Logf("the cluster's pipeline: %s", tl.report(benchStopSteps))
		b.Logf("stop %d at once: the API took the %d stops in %v, all Deployments at 0 replicas after %v, all Stopped after %v; %s", n,
			n, patched.Round(time.Millisecond), applied.Round(time.Millisecond), stopped.Round(time.Millisecond), cycles)
		if path := os.Getenv("HANGAR_BENCH_AGENT_LOG"); path != "" {
			if err := os.WriteFile(path, []byte(agent.output()[logStart:]), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(applied.Seconds(), "applied-s")
		b.ReportMetric(stopped.Seconds(), "stopped-s")
		b.ReportMetric(float64(cycles.requests), "kube-requests")
	}
	b.ReportMetric(0, "ns/op")
	b.Log(benchProblems("agent", agent.output()))
}
