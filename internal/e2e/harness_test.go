// Package e2e runs Hangar end to end: the real `hangar` binary as server and agent processes, a
// real Kubernetes control plane (internal/testutil/kubetest), and assertions on what a user sees
// through the API.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

var binary string

// The tests run in parallel, three at a time unless -parallel says otherwise: they mostly wait on
// pods, on one shared cluster. A test may run in parallel when everything it creates is its own —
// its server and agents (random agent ids: an agent sees only its own workspaces), its workspaces
// (namespaces named by their ids), names made unique (kubetest's Namespace, token()), ports picked
// by the kernel — and it asserts nothing about what others create or about how fast the machine
// is. A test that depends on the host as a whole, or that must catch a moment the others' load can
// make too short, stays serial, with its reason in its comment (TestBuildUsersDoNotCollide,
// TestImageBuildWorkspace, TestProxy). docs/decisions.md, "CI time: the end-to-end tests in
// parallel".
const defaultParallel = 3

// longFirst are the longest parallel tests as measured (docs/benchmarks.md), longest first.
// parallel starts them before the others: Go lets paused parallel tests go in no set order once
// the serial ones are done, and a long test that starts last ends the run alone. A name missing
// here, or one that is no longer long, costs time, nothing else.
var longFirst = []string{
	"TestCorpusSampleRunsOnRealNode", "TestRealNode", "TestTeamRepositoryWorkspace", "TestImageBuildWorkspace", "TestNewUserQuickstart",
	"TestHelmCharts", "TestComposeDevcontainerOnRealNode", "TestServerDownConverges", "TestTwoOwnersSameName",
}

// places is how many parallel tests run at once (-parallel; Go's own limit is lifted, so that every
// paused test reaches the queue), and waiting the tests that called parallel and have not started.
var queue = struct {
	sync.Mutex
	cond    sync.Cond
	places  int
	waiting map[string]bool
}{waiting: map[string]bool{}}

// parallel is t.Parallel with an order: it is a parallel test's first statement, and the test goes
// on once a place is free and no test of longFirst before it is still waiting. Its place is given
// back after the test's other cleanups (its processes stopped, its namespaces deleted). Go's time
// for the test includes the wait, which the test logs.
func parallel(t *testing.T) {
	t.Helper()
	rank := func(name string) int {
		if i := slices.Index(longFirst, name); i >= 0 {
			return i
		}
		return len(longFirst)
	}
	queue.Lock()
	queue.waiting[t.Name()] = true
	queue.Unlock()
	t.Parallel()
	queued := time.Now()
	queue.Lock()
	defer queue.Unlock()
	for {
		ahead := false
		for name := range queue.waiting {
			ahead = ahead || rank(name) < rank(t.Name())
		}
		if queue.places > 0 && !ahead {
			break
		}
		queue.cond.Wait()
	}
	queue.places--
	delete(queue.waiting, t.Name())
	queue.cond.Broadcast()
	if waited := time.Since(queued); waited > time.Second {
		// Go counts the wait in the test's time: say how much of it was the queue's.
		t.Logf("parallel: waited %v for a place", waited.Round(100*time.Millisecond))
	}
	t.Cleanup(func() {
		queue.Lock()
		defer queue.Unlock()
		queue.places++
		queue.cond.Broadcast()
	})
}

func TestMain(m *testing.M) {
	flag.Parse()
	queue.cond.L = &queue.Mutex
	queue.places = defaultParallel
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.parallel" {
			queue.places, _ = strconv.Atoi(f.Value.String())
		}
	})
	if err := flag.Set("test.parallel", "1000"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "hangar-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "hangar")
	build := exec.Command("go", "build", "-o", binary, "../../cmd/hangar")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build hangar: %v\n%s", err, out)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	kubetest.Main(m)
}

// proc is a running hangar process whose output is kept for failure messages.
type proc struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd
	outputBuffer
	done chan struct{}
}

// outputBuffer keeps what a process writes (from its own goroutines) for reading at any time.
type outputBuffer struct {
	mu  sync.Mutex
	out bytes.Buffer
}

func (o *outputBuffer) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.out.Write(b)
}

func (o *outputBuffer) output() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.out.String()
}

func start(t testing.TB, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, done: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = append(append(os.Environ(), agentMetricsAnyPort), env...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("--- output of %s:\n%s", name, p.output())
		}
	})
	return p
}

// agentMetricsAnyPort lets agents run side by side: each serves /metrics on a port of its own
// instead of the default 127.0.0.1:9090 (a test that scrapes one reads the port from its log).
const agentMetricsAnyPort = "HANGAR_AGENT_METRICS_LISTEN=127.0.0.1:0"

// stop signals the process and waits for it to end (SIGKILL after 10 s).
func (p *proc) stop(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// server is a running `hangar server` on SQLite.
type server struct {
	*proc
	URL        string
	AdminToken string
	dataDir    string
	listen     string
	// args are more options of `hangar server`, env more variables of its environment.
	args, env []string
}

// startServer starts `hangar server` on SQLite with more options args.
func startServer(t testing.TB, args ...string) *server {
	t.Helper()
	return startServerWith(t, nil, args...)
}

// startServerWith is startServer with more variables env in the server's environment (a test that
// runs in parallel does not change its own process's: t.Setenv and t.Parallel exclude each other).
func startServerWith(t testing.TB, env []string, args ...string) *server {
	t.Helper()
	s := &server{dataDir: t.TempDir(), listen: "127.0.0.1:0", args: args, env: env}
	s.launch(t)
	tok, err := os.ReadFile(filepath.Join(s.dataDir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	s.AdminToken = strings.TrimSpace(string(tok))
	return s
}

var listening = regexp.MustCompile(`listening on (http://\S+)`)

// launch starts (or restarts, on the same address and data) the server process.
func (s *server) launch(t testing.TB) {
	t.Helper()
	s.proc = start(t, "server", append([]string{"HANGAR_LOG_LEVEL=debug"}, s.env...), append([]string{"server", "--listen", s.listen, "--data-dir", s.dataDir}, s.args...)...)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := listening.FindStringSubmatch(s.output()); m != nil {
			s.URL = m[1]
			s.listen = strings.TrimPrefix(s.URL, "http://")
			return
		}
		select {
		case <-s.done:
			t.Fatalf("server exited:\n%s", s.output())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("server did not print its address:\n%s", s.output())
}

func (s *server) client(t testing.TB, token string) *sdk.Client {
	t.Helper()
	c, err := sdk.New(s.URL, token)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// registerAgent creates an agent whose workspaces run on the cluster's simulated node (kwok: no
// containers, every pod Running at once), and writes its token to a file for `hangar agent
// --token-file`. config is the agent's JSON configuration ("" for none); the simulated node's
// selector and toleration are added to it.
func (s *server) registerAgent(t testing.TB, name string, config string) string {
	t.Helper()
	return s.registerAgentOn(t, name, config, true)
}

// registerRealAgent creates an agent whose workspaces run on the cluster's real node.
func (s *server) registerRealAgent(t testing.TB, name string, config string) string {
	t.Helper()
	return s.registerAgentOn(t, name, config, false)
}

func (s *server) registerAgentOn(t testing.TB, name string, config string, kwok bool) string {
	t.Helper()
	req := sdk.CreateAgentRequest{Name: name}
	if kwok {
		cfg := map[string]any{}
		if config != "" {
			if err := json.Unmarshal([]byte(config), &cfg); err != nil {
				t.Fatalf("agent config %s: %v", config, err)
			}
		}
		cfg["node_selector"] = map[string]string{"type": "kwok"}
		cfg["tolerations"] = []map[string]string{{"key": kubetest.KwokTaint, "operator": "Exists", "effect": "NoSchedule"}}
		b, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		config = string(b)
	}
	if config != "" {
		req.Config = []byte(config)
	}
	a, err := s.client(t, s.AdminToken).CreateAgent(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), name+".token")
	if err := os.WriteFile(f, []byte(a.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func startAgent(t testing.TB, s *server, c *kubetest.Cluster, name, tokenFile, leaseNamespace string) *proc {
	t.Helper()
	return start(t, "agent "+name, []string{"HANGAR_LOG_LEVEL=debug"}, "agent", "--server", s.URL, "--token-file", tokenFile,
		"--kubeconfig", c.Kubeconfig, "--lease-namespace", leaseNamespace, "--identity", name)
}

// waitFor polls the workspace through the API until cond holds; it fails the test after timeout
// with the last state seen.
func waitFor(t testing.TB, c *sdk.Client, name string, timeout time.Duration, what string, cond func(sdk.Workspace) bool) sdk.Workspace {
	t.Helper()
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
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for workspace %s to be %s; last seen desired=%s actual=%s error=%+v (%v)",
		timeout, name, what, last.DesiredState, last.ActualState, last.Error, lastErr)
	return last
}

func state(desired, actual string) func(sdk.Workspace) bool {
	return func(w sdk.Workspace) bool { return w.DesiredState == desired && w.ActualState == actual }
}

// lines returns the lines of s containing substr, for failure messages.
func lines(s, substr string) string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if strings.Contains(sc.Text(), substr) {
			out = append(out, sc.Text())
		}
	}
	return strings.Join(out, "\n")
}

// runCLI runs a client command of the binary against the server as admin.
func runCLI(s *server, args ...string) (string, error) {
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "HANGAR_URL="+s.URL, "HANGAR_TOKEN="+s.AdminToken, "HOME="+os.TempDir())
	out, err := cmd.CombinedOutput()
	return string(out), err
}
