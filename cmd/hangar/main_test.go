package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
)

// TestBinaryEndToEnd builds the real binary, starts `hangar server` as the README does (on its
// embedded store), and drives it with the real CLI and an agent speaking the reconcile protocol over
// HTTP: create → Running, stop → Stopped, start → Running, delete → Terminated, and an apply error
// shown by `hangar show`.
func TestBinaryEndToEnd(t *testing.T) {
	h := startLoggedIn(t)
	hangar, must := h.hangar, h.must
	out := must("agents", "create", "k1")
	agentToken := regexp.MustCompile(`hga_[A-Za-z0-9_-]+`).FindString(out)
	if agentToken == "" {
		t.Fatalf("no agent token in:\n%s", out)
	}
	must("create", "w1", "--agent", "k1")

	// A minimal agent, cycling every 20 ms (its partial reconcile interval): it answers the server's desired state by reporting that state reached.
	ag := &fakeAgent{t: t, url: h.url, token: agentToken}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				ag.cycle()
			}
		}
	}()
	defer func() { close(stop); <-done }()

	must("stop", "w1", "--wait", "--timeout", "30s")
	if out := must("show", "w1"); !strings.Contains(out, "Stopped") {
		t.Fatalf("show after stop:\n%s", out)
	}
	must("start", "w1", "--wait", "--timeout", "30s")
	must("restart", "w1", "--wait", "--timeout", "30s")
	var ws sdk.Workspace
	if err := json.Unmarshal([]byte(must("show", "w1", "-o", "json")), &ws); err != nil || ws.DesiredState != "Running" || ws.ActualState != "Running" {
		t.Fatalf("after restart: %+v %v", ws, err)
	}
	ag.failNext(ws.KubeName, "admission webhook \"policy.example.com\" denied the request: image not allowed")
	must("stop", "w1", "--wait", "--timeout", "30s")
	out, err := hangar("start", "w1", "--wait", "--timeout", "30s")
	if err == nil || !strings.Contains(out, "image not allowed") {
		t.Fatalf("start with an apply error: err %v\n%s", err, out)
	}
	if out := must("show", "w1"); !strings.Contains(out, "Error") || !strings.Contains(out, "image not allowed") {
		t.Fatalf("show does not give the error:\n%s", out)
	}
	must("delete", "w1", "--yes", "--wait", "--timeout", "30s")

	// A kubernetes template: the devfile comes from the template, the cluster from --agent.
	devfilePath := filepath.Join(h.dir, "devfile.yaml")
	if err := os.WriteFile(devfilePath, []byte("schemaVersion: 2.2.0\ncomponents:\n- name: tools\n  container:\n    image: docker.io/library/golang:1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := must("templates", "push", "go-dev", "--devfile", devfilePath); !strings.Contains(out, "kubernetes template go-dev version 1") {
		t.Fatalf("templates push --devfile:\n%s", out)
	}
	must("create", "w2", "--template", "go-dev", "--agent", "k1", "--wait", "--timeout", "30s")
	if out := must("list"); !regexp.MustCompile(`w2\s+k1\s+Running\s+Running`).MatchString(out) {
		t.Fatalf("list after creating from a kubernetes template:\n%s", out)
	}
	if out, err := hangar("templates", "push", "go-dev", "--directory", "testdata/markers"); err == nil || !strings.Contains(out, `template "go-dev" is a kubernetes template, not terraform`) {
		t.Fatalf("pushing a terraform module onto a kubernetes template: %v\n%s", err, out)
	}
	if out, err := hangar("start", "w1"); err == nil || !strings.Contains(out, "permanent") {
		t.Fatalf("start after delete: %v\n%s", err, out)
	}
}

// fakeAgent speaks the reconcile protocol: for every config the server sends it reports, in its next
// cycle, the state that config leads to (or an apply error when told to fail), as a real agent
// reports a Deployment once it changes.
type fakeAgent struct {
	t     *testing.T
	url   string
	token string
	rv    int
	fail  map[string]string
	infos []protocol.WorkspaceAgentInfo
}

// failNext makes the next apply of the workspace whose cluster name is name fail (the agent names
// workspaces by cluster name).
func (a *fakeAgent) failNext(name, msg string) {
	a.fail = map[string]string{name: msg}
}

func (a *fakeAgent) cycle() {
	body, _ := json.Marshal(protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: append([]protocol.WorkspaceAgentInfo{}, a.infos...)})
	a.infos = nil
	req, _ := http.NewRequest("POST", a.url+protocol.ReconcilePath, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	var out protocol.ReconcileResponse
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&out) != nil {
		return
	}
	for _, w := range out.WorkspaceRailsInfos {
		if w.ConfigToApply == "" {
			continue // nothing to apply: the Deployment does not change, so there is nothing to report
		}
		info := protocol.WorkspaceAgentInfo{Name: w.Name, Namespace: w.Namespace}
		a.rv++
		replicas := int32(0)
		state := "Stopped"
		switch w.DesiredState {
		case "Running":
			replicas, state = 1, "Running"
		case "Terminated":
			info.TerminationProgress = "Terminated"
		}
		if msg, ok := a.fail[w.Name]; ok && w.ConfigToApply != "" && w.DesiredState == "Running" {
			delete(a.fail, w.Name)
			info.ErrorDetails = &protocol.ErrorDetails{ErrorType: "applier", ErrorMessage: msg}
		} else if info.TerminationProgress == "" {
			info.LatestK8sDeploymentInfo = deployment(a.rv, replicas, state)
		}
		a.infos = append(a.infos, info)
	}
}

func deployment(rv int, replicas int32, state string) *protocol.DeploymentInfo {
	avail := replicas
	return &protocol.DeploymentInfo{
		Metadata: protocol.DeploymentMetadata{ResourceVersion: fmt.Sprint(rv)},
		Spec:     &protocol.DeploymentSpec{Replicas: &replicas},
		Status: &protocol.DeploymentStatus{Replicas: replicas, AvailableReplicas: avail, Conditions: []protocol.DeploymentCondition{
			{Type: "Available", Status: "True", Reason: "MinimumReplicasAvailable"},
			{Type: "Progressing", Status: "True", Reason: "NewReplicaSetAvailable"}}},
	}
}

// harness is a `hangar server` process started as the README does (on its embedded store, with its
// in-process provisioner), and the real CLI logged in to it as admin.
type harness struct {
	url    string
	dir    string
	bin    string
	token  string   // the admin's
	env    []string // the CLI's environment
	hangar func(args ...string) (string, error)
	must   func(args ...string) string
}

// templateTestEnv passes the tests' own variables (MARKER_DIR, MACHINE_DIR) to their templates: no
// other variable of a server's or provisioner's environment reaches a template.
var templateTestEnv = []string{"HANGAR_PROVISIONER_ENV=MARKER_DIR,MACHINE_DIR"}

// unisolated runs templates without isolation, for those that make their "machine" a process of
// the test machine (which isolation kills when the build ends) and for the benchmarks.
const unisolated = "HANGAR_INSECURE_NO_TEMPLATE_ISOLATION=true"

// sharedDir is a directory where the templates of these tests make their resources (marker files):
// outside /tmp, which is private to each isolated build, and writable by the builds' unprivileged
// users. It is removed when the test ends.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "hangar-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startServerOutput starts `bin server` with args and returns its standard output's lines (the
// channel closes when the server ends) and its standard error; the server is stopped when the test
// ends.
func startServerOutput(t *testing.T, bin string, args ...string) (<-chan string, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv := exec.CommandContext(ctx, bin, append([]string{"server"}, args...)...)
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	srv.Stderr = stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = srv.Wait() })
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return lines, stderr
}

// startLoggedIn starts the server with env added to its environment, and logs the CLI in.
func startLoggedIn(t *testing.T, env ...string) *harness {
	t.Helper()
	dir := t.TempDir()
	bin := buildHangar(t)
	dataDir := filepath.Join(dir, "data")
	ctx, cancel := context.WithCancel(context.Background())
	srv := exec.CommandContext(ctx, bin, "server", "--listen", "127.0.0.1:0")
	// Killed at the end, its output is not awaited from processes it started that outlive it (a
	// Terraform workspace's machine holding its stderr): the test ends.
	srv.WaitDelay = 10 * time.Second
	srv.Env = append(append(os.Environ(), "HANGAR_DATA_DIR="+dataDir), append(templateTestEnv, env...)...)
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	srv.Stderr = &stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = srv.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", stderr.String())
		}
	})

	// The server prints where it listens and where the admin token is.
	lines := bufio.NewScanner(stdout)
	var url, tokenFile string
	for lines.Scan() && (url == "" || tokenFile == "") {
		line := lines.Text()
		if m := regexp.MustCompile(`listening on (https?://\S+)`).FindStringSubmatch(line); m != nil {
			url = m[1]
		}
		if m := regexp.MustCompile(`token is in (\S+) `).FindStringSubmatch(line); m != nil {
			tokenFile = m[1]
		}
	}
	if url == "" || tokenFile != filepath.Join(dataDir, "admin-token") {
		t.Fatalf("server printed url %q token file %q; stderr:\n%s", url, tokenFile, stderr.String())
	}
	go func() {
		for lines.Scan() {
		}
	}()
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	h := &harness{url: url, dir: dir, bin: bin, token: strings.TrimSpace(string(tok)),
		env: append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "HANGAR_URL=", "HANGAR_TOKEN=")}
	h.hangar = func(args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = h.env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	h.must = func(args ...string) string {
		t.Helper()
		out, err := h.hangar(args...)
		if err != nil {
			t.Fatalf("hangar %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	h.must("login", "--url", url, "--token", strings.TrimSpace(string(tok)))
	return h
}
