package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/pgtest"
)

// TestTwoServerProcessesWakeEachOther runs two `hangar server` processes on one Postgres database:
// an agent long-polling process B is woken by a stop made through process A (Postgres
// LISTEN/NOTIFY), long before its timeout.
func TestTwoServerProcessesWakeEachOther(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "hangar")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	db := pgtest.NewDatabase(t)
	start := func(name string) (url, dataDir string) {
		dataDir = filepath.Join(dir, name)
		ctx, cancel := context.WithCancel(context.Background())
		cmd := exec.CommandContext(ctx, bin, "server", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--postgres-url", db)
		stdout, _ := cmd.StdoutPipe()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cancel(); _ = cmd.Wait() })
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(sc.Text()); m != nil {
				url = m[1]
				break
			}
		}
		go func() {
			for sc.Scan() {
			}
		}()
		if url == "" {
			t.Fatalf("server %s did not start:\n%s", name, stderr.String())
		}
		return url, dataDir
	}
	urlA, dirA := start("a")
	urlB, dirB := start("b")
	var token []byte
	for _, d := range []string{dirA, dirB} {
		if b, err := os.ReadFile(filepath.Join(d, "admin-token")); err == nil {
			token = b
		}
	}
	if token == nil {
		t.Fatal("no replica wrote the admin token")
	}
	ctx := context.Background()
	a, _ := sdk.New(urlA, strings.TrimSpace(string(token)))
	agent, err := a.CreateAgent(ctx, sdk.CreateAgentRequest{Name: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "w", Agent: "k1"}); err != nil {
		t.Fatal(err)
	}
	post := func(url, path string, body any, out any) {
		t.Helper()
		var rd *bytes.Reader
		method := "GET"
		if body != nil {
			b, _ := json.Marshal(body)
			rd, method = bytes.NewReader(b), "POST"
		}
		var req *http.Request
		if rd != nil {
			req, _ = http.NewRequest(method, url+path, rd)
		} else {
			req, _ = http.NewRequest(method, url+path, nil)
		}
		req.Header.Set("Authorization", "Bearer "+agent.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(out) != nil {
			t.Fatalf("%s %s: %d", method, path, resp.StatusCode)
		}
	}
	// The agent takes the workspace's first config (through B), so nothing is pending.
	var rec protocol.ReconcileResponse
	post(urlB, protocol.ReconcilePath, protocol.ReconcileRequest{UpdateType: protocol.UpdateFull, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}}, &rec)
	if len(rec.WorkspaceRailsInfos) != 1 {
		t.Fatalf("first reconcile: %+v", rec)
	}

	got := make(chan time.Time, 1)
	go func() {
		var w protocol.WaitResponse
		post(urlB, protocol.WaitPath+"?timeout_seconds=60", nil, &w)
		if !w.Pending {
			t.Error("woken without anything pending")
		}
		got <- time.Now()
	}()
	// Give the wait a moment to be in place; whether it is or not, the answer must be pending.
	deadline := time.After(10 * time.Second)
	var sent time.Time
	for sent.IsZero() {
		select {
		case <-deadline:
			t.Fatal("no waiter registered on B")
		case <-time.After(20 * time.Millisecond):
		}
		if metric(t, urlB, "hangar_agent_waiters") == "1" {
			sent = time.Now()
			if _, err := a.UpdateWorkspace(ctx, "w", sdk.UpdateWorkspaceRequest{DesiredState: "Stopped"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	select {
	case at := <-got:
		t.Logf("a stop through A woke the wait on B after %v", at.Sub(sent))
	case <-time.After(30 * time.Second):
		t.Fatal("the wait on B was not woken by a stop through A")
	}
}

func metric(t *testing.T, url, name string) string {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return v
		}
	}
	return ""
}
