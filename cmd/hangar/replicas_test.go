package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/pgtest"
	"github.com/hangar-dev/hangar/internal/tfmodule"
)

// TestTwoServerProcessesWakeEachOther runs two `hangar server` processes on one Postgres database.
// An agent's long-poll on one process is woken by a stop or start made through the other (Postgres
// LISTEN/NOTIFY), long before its 60 s timeout. Rounds alternate which process waits; the test logs
// the latency from sending the PATCH to the wait's answer.
func TestTwoServerProcessesWakeEachOther(t *testing.T) {
	dir := t.TempDir()
	bin := buildHangar(t)
	db := pgtest.NewDatabase(t)

	// Both processes start at once: whichever bootstraps first writes the admin token.
	procs := []*serverProc{startServer(t, bin, db, filepath.Join(dir, "a")), startServer(t, bin, db, filepath.Join(dir, "b"))}
	var token string
	for _, p := range procs {
		p.waitURL(t)
		if b, err := os.ReadFile(filepath.Join(p.dataDir, "admin-token")); err == nil {
			if token != "" {
				t.Fatal("both processes wrote an admin token")
			}
			token = strings.TrimSpace(string(b))
		}
	}
	if token == "" {
		t.Fatal("no process wrote the admin token")
	}
	ctx := t.Context()
	users := make([]*sdk.Client, len(procs))
	for i, p := range procs {
		c, err := sdk.New(p.url, token)
		if err != nil {
			t.Fatal(err)
		}
		users[i] = c
	}
	ag, err := users[0].CreateAgent(ctx, sdk.CreateAgentRequest{Name: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := users[0].CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "w", Agent: "k1"}); err != nil {
		t.Fatal(err)
	}

	const rounds = 20
	states := [2]string{"Stopped", "Running"}
	var lat []time.Duration
	for i := range rounds {
		waiter, changer := procs[1], users[0] // wait on B, change through A; then the other way
		if i%2 == 1 {
			waiter, changer = procs[0], users[1]
		}
		// The agent answers what is pending (the first config, then the last change), through the
		// other process than the one it will wait on, so nothing is pending.
		var rec protocol.ReconcileResponse
		if err := agentCall(ctx, procs[(i+1)%2].url, ag.Token, "POST", protocol.ReconcilePath,
			protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}}, &rec); err != nil {
			t.Fatal(err)
		}
		if len(rec.WorkspaceRailsInfos) != 1 || rec.WorkspaceRailsInfos[0].ConfigToApply == "" {
			t.Fatalf("round %d: reconcile answered %+v, want w with its config", i, rec.WorkspaceRailsInfos)
		}

		type result struct {
			resp protocol.WaitResponse
			err  error
			at   time.Time
		}
		got := make(chan result, 1)
		go func() {
			var r result
			r.err = agentCall(ctx, waiter.url, ag.Token, "GET", protocol.WaitPath+"?timeout_seconds=60", nil, &r.resp)
			r.at = time.Now()
			got <- r
		}()
		// Change only once the wait has looked and blocks, so that the notification, not the first
		// look, is what ends it.
		waitForMetric(t, waiter.url, "hangar_agent_waiters", "1")
		sent := time.Now()
		if _, err := changer.UpdateWorkspace(ctx, "w", sdk.UpdateWorkspaceRequest{DesiredState: states[i%2]}); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-got:
			if r.err != nil || !r.resp.Pending {
				t.Fatalf("round %d: the wait answered %+v, %v; want pending", i, r.resp, r.err)
			}
			d := r.at.Sub(sent)
			if d > 10*time.Second {
				t.Fatalf("round %d: the wait answered %v after the change: not woken, or woken no faster than polling", i, d)
			}
			lat = append(lat, d)
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: the wait was not woken by a change through the other process", i)
		}
	}
	slices.Sort(lat)
	t.Logf("a change through one process reached a wait on the other in: median %v, p95 %v, max %v (%d rounds)",
		lat[len(lat)/2], lat[len(lat)*95/100], lat[len(lat)-1], len(lat))
}

type serverProc struct {
	url     string
	dataDir string
	lines   chan string
	stderr  *syncBuffer
}

// startServer starts `hangar server` on Postgres with its own data directory, on a free port, with
// extra flags.
func startServer(t *testing.T, bin, db, dataDir string, extra ...string) *serverProc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, append([]string{"server", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--postgres-url", db}, extra...)...)
	cmd.Env = append(os.Environ(), templateTestEnv...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &serverProc{dataDir: dataDir, lines: make(chan string, 16), stderr: &syncBuffer{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // nobody reads after the URL; drop
			}
		}
	}()
	return p
}

// waitURL reads the process's output until it says where it listens.
func (p *serverProc) waitURL(t *testing.T) {
	t.Helper()
	re := regexp.MustCompile(`listening on (http://\S+)`)
	timeout := time.After(60 * time.Second)
	for p.url == "" {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("server in %s exited before listening:\n%s", p.dataDir, p.stderr.String())
			}
			if m := re.FindStringSubmatch(line); m != nil {
				p.url = m[1]
			}
		case <-timeout:
			t.Fatalf("server in %s did not say where it listens:\n%s", p.dataDir, p.stderr.String())
		}
	}
}

// agentCall sends a request with an agent token and decodes a 200 answer into out. It returns
// errors instead of failing the test, so that a goroutine may call it.
func agentCall(ctx context.Context, url, token, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}

// waitForMetric waits until a process's /metrics shows sample at value: a condition in another
// process, polled with a deadline.
func waitForMetric(t *testing.T, url, sample, value string) {
	t.Helper()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(30 * time.Second)
	last := ""
	for {
		if last = metric(t, url, sample); last == value {
			return
		}
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("%s at %s is %q, want %s", sample, url, last, value)
		}
	}
}

func metric(t *testing.T, url, sample string) string {
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

// syncBuffer is a bytes.Buffer safe for the process's writes and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBuildQueuedOnOneReplicaRunsOnAnother: two server processes on one Postgres; only the second
// runs a provisioner, and neither polls for builds (--build-poll-interval 1h). A workspace created
// through the first is built by the second's provisioner, woken by Postgres LISTEN/NOTIFY: Running
// within seconds, long before the provisioner's own 30 s long-poll would have looked again.
func TestBuildQueuedOnOneReplicaRunsOnAnother(t *testing.T) {
	dir := t.TempDir()
	bin := buildHangar(t)
	db := pgtest.NewDatabase(t)
	t.Setenv("MARKER_DIR", filepath.Join(sharedDir(t), "markers"))
	a := startServer(t, bin, db, filepath.Join(dir, "a"), "--provisioners", "0", "--build-poll-interval", "1h")
	a.waitURL(t)
	b := startServer(t, bin, db, filepath.Join(dir, "b"), "--provisioners", "1", "--build-poll-interval", "1h")
	b.waitURL(t)
	tok, err := os.ReadFile(filepath.Join(a.dataDir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := sdk.New(a.url, strings.TrimSpace(string(tok)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	archive, err := tfmodule.Pack("testdata/markers")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PushTemplateVersion(ctx, "markers", sdk.CreateTemplateVersionRequest{Kind: "terraform", Archive: archive}); err != nil {
		t.Fatal(err)
	}
	// Let b's provisioner settle into its long-poll: its first look found nothing.
	for !strings.Contains(b.stderr.String(), "provisioner ready") {
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(10 * time.Millisecond): // polling another process's log
		}
	}
	for round := 0; round < 3; round++ {
		name := fmt.Sprintf("r%d", round)
		begin := time.Now()
		if _, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: name, Template: "markers"}); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		ws, err := c.WaitForState(wctx, name, func(w sdk.Workspace) (bool, error) { return w.ActualState == "Running", nil }, nil, 20*time.Millisecond)
		cancel()
		if err != nil {
			t.Fatalf("round %d: %s is %s/%s, not Running within 20 s (woken by another replica?): %v\nb's log:\n%s", round, name, ws.DesiredState, ws.ActualState, err, b.stderr.String())
		}
		t.Logf("round %d: created through one replica, built by the other's provisioner, Running after %v", round, time.Since(begin).Round(time.Millisecond))
	}
}
