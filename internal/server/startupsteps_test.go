package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// The image build's steps with the workspace: what its agent reports is in the workspace's detail
// (not in the list), for its owner and admins only; another agent's report of the same cluster
// name, or a report naming another namespace, stores nothing; once the workspace no longer
// starts, a step left running shows as interrupted and one not begun as skipped.
func TestStartupStepsWithTheWorkspace(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			agentA := createAgent(t, env, "a", nil)
			agentB := createAgent(t, env, "b", nil)
			dev := createUser(t, env, "dev")
			eve := createUser(t, env, "eve")
			var ws sdk.Workspace
			mustCall(t, env, dev, "POST", "/api/v1/workspaces", map[string]any{"name": "app", "agent": "a"}, http.StatusCreated, &ws)
			at := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
			steps := []protocol.StartupStep{
				{Name: protocol.StepImagePrepare, State: protocol.StepDone, StartedAt: &at, EndedAt: &at, Detail: "building r:1 from b:1: 1 steps, 0 features"},
				{Name: protocol.StepImageBuild, State: protocol.StepRunning, StartedAt: &at, Detail: "step 1/1: RUN make", Log: "step 1/1: RUN make\nsecret-looking output\n"},
				{Name: protocol.StepImagePush, State: protocol.StepPending},
			}
			report := func(token, namespace, state string, steps []protocol.StartupStep) {
				t.Helper()
				reconcileCall(t, env, token, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{
					{Name: ws.KubeName, Namespace: namespace, LatestK8sDeploymentInfo: deploymentIn(state, 7), StartupSteps: steps}}})
			}
			shown := func() []sdk.WorkspaceStartupStep {
				t.Helper()
				var got sdk.Workspace
				mustCall(t, env, dev, "GET", "/api/v1/workspaces/app", nil, http.StatusOK, &got)
				return got.StartupSteps
			}
			report(agentB, ws.Namespace, "Starting", steps)
			report(agentA, "hangar-elsewhere", "Starting", steps)
			if got := shown(); len(got) != 0 {
				t.Fatalf("another agent's report, or another namespace's, was stored: %+v", got)
			}
			report(agentA, ws.Namespace, "Starting", steps)
			got := shown()
			if len(got) != 3 || got[1].State != "running" || got[1].Detail != "step 1/1: RUN make" || got[1].Log != steps[1].Log || got[2].State != "pending" {
				t.Fatalf("the agent's report: %+v", got)
			}
			var list []sdk.Workspace
			mustCall(t, env, dev, "GET", "/api/v1/workspaces", nil, http.StatusOK, &list)
			if len(list) != 1 || list[0].StartupSteps != nil {
				t.Errorf("the list carries steps: %+v", list)
			}
			mustCall(t, env, eve, "GET", "/api/v1/workspaces/"+url.PathEscape("dev/app"), nil, http.StatusNotFound, nil)
			var asAdmin sdk.Workspace
			mustCall(t, env, env.AdminToken, "GET", "/api/v1/workspaces/"+url.PathEscape("dev/app"), nil, http.StatusOK, &asAdmin)
			if len(asAdmin.StartupSteps) != 3 {
				t.Errorf("an admin sees %+v", asAdmin.StartupSteps)
			}
			// A build that failed, then a pod without a build that runs (an update removed it):
			// the old pod's failure is not the running workspace's.
			failedBuild := append([]protocol.StartupStep(nil), steps...)
			failedBuild[1].State, failedBuild[1].EndedAt = protocol.StepFailed, &at
			report(agentA, ws.Namespace, "Starting", failedBuild)
			report(agentA, ws.Namespace, "Running", nil)
			var running sdk.Workspace
			mustCall(t, env, dev, "GET", "/api/v1/workspaces/app", nil, http.StatusOK, &running)
			if running.StartupFailed != "" || running.StartupSteps[1].State != "failed" {
				t.Errorf("running after an earlier pod's failed build: failed %q, steps %+v", running.StartupFailed, running.StartupSteps)
			}
			// Stopped mid-build: the pod went, and the agent reports no steps of it.
			report(agentA, ws.Namespace, "Starting", steps)
			report(agentA, ws.Namespace, "Stopped", nil)
			if got := shown(); got[0].State != "done" || got[1].State != sdk.StepInterrupted || got[2].State != sdk.StepSkipped {
				t.Errorf("after a stop mid-build: %+v", got)
			}
		})
	}
}

// oaStartupStep: the helper's report of its postStart commands, and the workspace's detail that
// shows it, against the OpenAPI document (the workspace tfssh and its helper token are oaGitSSH's).
func oaStartupStep(t *testing.T, c *oaChecker, dev string) {
	t.Helper()
	helper := protocol.WorkspaceAgentTokenPrefix + "openapi-gitssh"
	c.do(helper, "PUT", protocol.StartupStepPath, map[string]any{"name": "post-start", "state": "failed", "started_at": "2026-11-27T09:00:00Z",
		"ended_at": "2026-11-27T09:00:02Z", "detail": "command 1/1: setup", "log": "exit status 3\n"}, 204, true)
	c.do(helper, "PUT", protocol.StartupStepPath, map[string]any{"name": "image-build", "state": "running"}, 400, false)
	c.do(dev, "GET", "/api/v1/workspaces/tfssh", nil, 200, true)
}

// A workspace's helper reports its postStart commands with its token: shown with the workspace's
// steps; a failure while the workspace runs makes it "Running, startup failed"; a report names a
// step the helper runs or is a 400 naming the field; another workspace's token reports its own
// workspace only; after a restart the earlier start's failure is no longer shown.
func TestHelperStartupStep(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine, withHelperTokens)
			agentToken := createAgent(t, env, "k1", nil)
			dev := createUser(t, env, "dev")
			var app, other sdk.Workspace
			mustCall(t, env, dev, "POST", "/api/v1/workspaces", map[string]any{"name": "app", "agent": "k1"}, http.StatusCreated, &app)
			mustCall(t, env, dev, "POST", "/api/v1/workspaces", map[string]any{"name": "other", "agent": "k1"}, http.StatusCreated, &other)
			tokens := helperTokens(t, env, agentToken)
			running := func(ws sdk.Workspace, rv int) {
				reconcileCall(t, env, agentToken, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{
					{Name: ws.KubeName, Namespace: ws.Namespace, LatestK8sDeploymentInfo: deploymentIn("Running", rv)}}})
			}
			running(app, 1)
			running(other, 2)
			detail := func(name string) sdk.Workspace {
				t.Helper()
				var ws sdk.Workspace
				mustCall(t, env, dev, "GET", "/api/v1/workspaces/"+name, nil, http.StatusOK, &ws)
				return ws
			}
			report := func(token string, st protocol.StartupStep) (int, []byte) {
				return call(t, env, token, "PUT", protocol.StartupStepPath, st)
			}
			at := env.Clock.Now()
			if status, body := report(tokens[app.KubeName], protocol.StartupStep{Name: protocol.StepPostStart, State: protocol.StepRunning, StartedAt: &at, Detail: "command 1/2: deps"}); status != http.StatusNoContent {
				t.Fatalf("running: %d %s", status, body)
			}
			if ws := detail("app"); len(ws.StartupSteps) != 1 || ws.StartupSteps[0].State != "running" || ws.StartupSteps[0].Detail != "command 1/2: deps" || ws.StartupFailed != "" {
				t.Fatalf("running: %+v, failed %q", ws.StartupSteps, ws.StartupFailed)
			}
			if status, body := report(tokens[app.KubeName], protocol.StartupStep{Name: protocol.StepPostStart, State: protocol.StepFailed, StartedAt: &at, EndedAt: &at,
				Detail: "command 2/2: setup", Log: "npm ERR! missing script: setup\n"}); status != http.StatusNoContent {
				t.Fatalf("failed: %d %s", status, body)
			}
			if ws := detail("app"); ws.StartupFailed != protocol.StepPostStart || ws.StartupSteps[0].Log != "npm ERR! missing script: setup\n" {
				t.Fatalf("failed: %+v, failed %q", ws.StartupSteps, ws.StartupFailed)
			}
			if ws := detail("other"); len(ws.StartupSteps) != 0 {
				t.Fatalf("app's report shows on other: %+v", ws.StartupSteps)
			}
			for _, bad := range []struct {
				st    protocol.StartupStep
				field string
			}{
				{protocol.StartupStep{Name: protocol.StepImageBuild, State: protocol.StepRunning}, "name"},
				{protocol.StartupStep{Name: protocol.StepPostStart, State: "exploded"}, "state"},
				{protocol.StartupStep{Name: protocol.StepPostStart, State: protocol.StepDone, Log: strings.Repeat("x", protocol.MaxStepLogBytes+1)}, "log"},
			} {
				if status, body := report(tokens[other.KubeName], bad.st); status != http.StatusBadRequest || !strings.Contains(string(body), `"field":"`+bad.field+`"`) {
					t.Errorf("%+v: %d %s, want a 400 naming %s", bad.st, status, body, bad.field)
				}
			}
			if status, _ := report("hwa_not-a-token", protocol.StartupStep{Name: protocol.StepPostStart, State: protocol.StepDone}); status != http.StatusUnauthorized {
				t.Errorf("a bad token: %d, want 401", status)
			}
			// A restart: the earlier start's failure is no longer the workspace's.
			env.Clock.Advance(time.Minute)
			mustCall(t, env, dev, "PATCH", "/api/v1/workspaces/app", map[string]any{"desired_state": "RestartRequested"}, http.StatusOK, nil)
			if ws := detail("app"); len(ws.StartupSteps) != 0 || ws.StartupFailed != "" {
				t.Errorf("after a restart: %+v, failed %q", ws.StartupSteps, ws.StartupFailed)
			}
		})
	}
}
