package cli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/sdk"
)

// state is one answer of the scripted GET: desired/actual, with the times the wait compares.
func state(desired, actual string, opts ...func(*sdk.Workspace)) sdk.Workspace {
	ws := sdk.Workspace{ID: "w-web", Name: "web", Owner: "admin", Agent: "eu", DesiredState: desired, ActualState: actual,
		DesiredStateUpdatedAt: ptr(t0.Add(time.Minute)), ActualStateUpdatedAt: ptr(t0.Add(2 * time.Minute)), CreatedAt: t0}
	for _, o := range opts {
		o(&ws)
	}
	return ws
}

func withError(typ, msg string) func(*sdk.Workspace) {
	return func(ws *sdk.Workspace) { ws.Error = &sdk.WorkspaceError{Type: typ, Message: msg} }
}

// before marks the actual state as reported before the last desired-state change.
func before(ws *sdk.Workspace) { ws.ActualStateUpdatedAt = ptr(t0) }

// answered sets responded_to_agent_at to t0+d.
func answered(d time.Duration) func(*sdk.Workspace) {
	return func(ws *sdk.Workspace) { ws.RespondedToAgentAt = ptr(t0.Add(d)) }
}

func withURL(ws *sdk.Workspace) { ws.URL = "https://3000-web.ws.example.com/" }

func TestWait(t *testing.T) {
	tests := []struct {
		name       string
		initial    sdk.Workspace // the workspace before the command (absent for create)
		args       []string
		script     []sdk.Workspace
		wantStdout string
		wantStderr string
	}{
		{
			name: "create until Running",
			args: []string{"create", "web", "--agent", "eu", "--wait"},
			script: []sdk.Workspace{
				state("Running", "CreationRequested"), state("Running", "CreationRequested"),
				state("Running", "Starting"), state("Running", "Starting"), state("Running", "Running", withURL),
			},
			wantStdout: "12:00:01  desired=Running  actual=CreationRequested\n" +
				"12:00:02  desired=Running  actual=Starting\n" +
				"12:00:03  desired=Running  actual=Running\n" +
				"Workspace web is Running at https://3000-web.ws.example.com/\n",
		},
		{
			name:    "start fails",
			initial: state("Stopped", "Stopped"),
			args:    []string{"start", "web", "--wait"},
			script: []sdk.Workspace{
				state("Running", "Starting"),
				state("Running", "Failed", withError("deployment", `ProgressDeadlineExceeded: ReplicaSet "web-1" has timed out progressing`)),
			},
			wantStdout: "12:00:01  desired=Running  actual=Starting\n" +
				"12:00:02  desired=Running  actual=Failed  error=deployment: ProgressDeadlineExceeded: ReplicaSet \"web-1\" has timed out progressing\n",
			wantStderr: "error: workspace web is Failed: deployment: ProgressDeadlineExceeded: ReplicaSet \"web-1\" has timed out progressing\n",
		},
		{
			name:       "Error without details",
			initial:    state("Running", "Starting"),
			args:       []string{"start", "web", "--wait"},
			script:     []sdk.Workspace{state("Running", "Error")},
			wantStdout: "12:00:01  desired=Running  actual=Error\n",
			wantStderr: "error: workspace web is Error (the agent reported no error details)\n",
		},
		{
			name:    "an Error from before the change does not end the wait",
			initial: state("Running", "Error", before, withError("applier", "old")),
			args:    []string{"stop", "web", "--wait"},
			script: []sdk.Workspace{
				state("Stopped", "Error", before, withError("applier", "old")),
				state("Stopped", "Stopping"), state("Stopped", "Stopped"),
			},
			wantStdout: "12:00:01  desired=Stopped  actual=Error  error=applier: old\n" +
				"12:00:02  desired=Stopped  actual=Stopping\n" +
				"12:00:03  desired=Stopped  actual=Stopped\n" +
				"Workspace web is Stopped.\n",
		},
		{
			name:    "an Error from before the change ends the wait once the agent reported after acting on it",
			initial: state("Stopped", "Error", before, withError("applier", "quota exceeded")),
			args:    []string{"start", "web", "--wait"},
			script: []sdk.Workspace{
				state("Running", "Error", before, withError("applier", "quota exceeded")),
				// The agent is told of the change...
				state("Running", "Error", before, withError("applier", "quota exceeded"), answered(3*time.Minute)),
				// ...and reports the same error again after applying the new config.
				state("Running", "Error", before, withError("applier", "quota exceeded"), answered(4*time.Minute)),
			},
			wantStdout: "12:00:01  desired=Running  actual=Error  error=applier: quota exceeded\n",
			wantStderr: "error: workspace web is Error: applier: quota exceeded\n",
		},
		{
			name:    "restart waits for Running again",
			initial: state("Running", "Running"),
			args:    []string{"restart", "web", "--wait"},
			script: []sdk.Workspace{
				// Not done: still the old Running, desired RestartRequested.
				state("RestartRequested", "Running"),
				state("RestartRequested", "Stopping"),
				// The server set desired back to Running when the agent reported Stopped.
				state("Running", "Stopped"),
				state("Running", "Starting"),
				state("Running", "Running", withURL),
			},
			wantStdout: "12:00:01  desired=RestartRequested  actual=Running\n" +
				"12:00:02  desired=RestartRequested  actual=Stopping\n" +
				"12:00:03  desired=Running  actual=Stopped\n" +
				"12:00:04  desired=Running  actual=Starting\n" +
				"12:00:05  desired=Running  actual=Running\n" +
				"Workspace web is Running at https://3000-web.ws.example.com/\n",
		},
		{
			name:    "restart seen only in the PATCH answer",
			initial: state("Running", "Running"),
			args:    []string{"restart", "web", "--wait"},
			script:  []sdk.Workspace{state("Running", "Running")},
			wantStdout: "12:00:01  desired=Running  actual=Running\n" +
				"Workspace web is Running.\n",
		},
		{
			name:    "delete until Terminated",
			initial: state("Stopped", "Stopped"),
			args:    []string{"delete", "web", "--yes", "--wait"},
			script:  []sdk.Workspace{state("Terminated", "Terminating"), state("Terminated", "Terminated")},
			wantStdout: "12:00:01  desired=Terminated  actual=Terminating\n" +
				"12:00:02  desired=Terminated  actual=Terminated\n" +
				"Workspace web is Terminated.\n",
		},
		{
			name:    "the desired state changes under the wait",
			initial: state("Stopped", "Stopped"),
			args:    []string{"start", "web", "--wait"},
			script:  []sdk.Workspace{state("Running", "Starting"), state("Terminated", "Starting")},
			wantStdout: "12:00:01  desired=Running  actual=Starting\n" +
				"12:00:02  desired=Terminated  actual=Starting\n",
			wantStderr: "error: the desired state of workspace web changed to Terminated while waiting for it to be Running\n",
		},
		{
			name:       "timeout",
			initial:    state("Stopped", "Stopped"),
			args:       []string{"start", "web", "--wait", "--timeout", "30ms"},
			script:     []sdk.Workspace{state("Running", "Starting")},
			wantStdout: "12:00:01  desired=Running  actual=Starting\n",
			wantStderr: "error: timed out after 30ms waiting for workspace web to be Running (desired=Running actual=Starting)\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, srv := newFakeAPI(t)
			if tt.initial.Name != "" {
				f.workspaces["web"] = tt.initial
			}
			f.script["web"] = tt.script
			c := newCLI(t, map[string]string{"HANGAR_URL": srv.URL, "HANGAR_TOKEN": adminToken})
			args := tt.args
			if !slices.Contains(args, "--timeout") {
				// A broken wait fails the test in seconds, not after the 10m default.
				args = append(args, "--timeout", "10s")
			}
			r := c.run(args...)
			if r.stdout != tt.wantStdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", r.stdout, tt.wantStdout)
			}
			if r.stderr != tt.wantStderr {
				t.Errorf("stderr = %q\nwant     %q", r.stderr, tt.wantStderr)
			}
			if wantCode := map[bool]int{true: 1}[tt.wantStderr != ""]; r.code != wantCode {
				t.Errorf("exit code = %d, want %d", r.code, wantCode)
			}
		})
	}
}

func TestWaitJSON(t *testing.T) {
	f, srv := newFakeAPI(t)
	f.workspaces["web"] = state("Running", "Running")
	f.script["web"] = []sdk.Workspace{state("Stopped", "Stopping"), state("Stopped", "Stopped")}
	c := newCLI(t, map[string]string{"HANGAR_URL": srv.URL, "HANGAR_TOKEN": adminToken})
	r := c.run("stop", "web", "--wait", "-o", "json", "--timeout", "10s")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	// stdout holds only the final workspace; progress goes to stderr.
	var ws sdk.Workspace
	if err := json.Unmarshal([]byte(r.stdout), &ws); err != nil || ws.ActualState != "Stopped" {
		t.Errorf("stdout = %q (%v)", r.stdout, err)
	}
	if want := "12:00:01  desired=Stopped  actual=Stopping\n12:00:02  desired=Stopped  actual=Stopped\n"; r.stderr != want {
		t.Errorf("stderr = %q, want %q", r.stderr, want)
	}
}

func TestWaitSurvivesAnUnavailableServer(t *testing.T) {
	f, srv := newFakeAPI(t)
	f.workspaces["web"] = state("Stopped", "Stopped")
	f.script["web"] = []sdk.Workspace{state("Running", "Starting")}
	c := newCLI(t, map[string]string{"HANGAR_URL": srv.URL, "HANGAR_TOKEN": adminToken})
	// Every poll after the PATCH is refused with 503: the wait retries until --timeout and says why.
	f.getStatus = 503
	r := c.run("start", "web", "--wait", "--timeout", "30ms")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "error: timed out after 30ms waiting for workspace web to be Running (desired=Running actual=Stopped); the last read failed: 503 Service Unavailable") {
		t.Errorf("exit %d, stderr = %q", r.code, r.stderr)
	}
	// The wait names the workspace owner/name, so that an admin never polls a namesake.
	if n := f.count("GET", "/api/v1/workspaces/admin%2Fweb"); n < 2 {
		t.Errorf("polled %d times, want retries", n)
	}
}

// A wait that never reaches its goal, with a --timeout longer than any test may take, still ends:
// the harness bounds every command, so that a broken wait fails its test instead of hanging the
// package (as the wait that never saw the agent act on a stale Error once did for 10 minutes).
func TestHarnessBoundsAWaitThatNeverEnds(t *testing.T) {
	f, srv := newFakeAPI(t)
	f.workspaces["web"] = state("Stopped", "Stopped")
	f.script["web"] = []sdk.Workspace{state("Running", "Starting")}
	c := newCLI(t, map[string]string{"HANGAR_URL": srv.URL, "HANGAR_TOKEN": adminToken})
	c.limit = 50 * time.Millisecond
	begin := time.Now()
	r := c.run("start", "web", "--wait", "--timeout", "1h")
	if took := time.Since(begin); took > commandLimit {
		t.Errorf("the command ran %s, longer than the harness limit %s", took, commandLimit)
	}
	if r.code != 1 || !strings.Contains(r.stderr, errCommandLimit.Error()) {
		t.Errorf("exit %d, stderr = %q, want the harness limit", r.code, r.stderr)
	}
	if n := f.count("GET", "/api/v1/workspaces/admin%2Fweb"); n < 2 {
		t.Errorf("polled %d times, want the wait to have kept polling until the limit", n)
	}
}
