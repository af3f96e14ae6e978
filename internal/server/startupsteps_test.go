package server_test

import (
	"net/http"
	"net/url"
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
			// Stopped mid-build: the pod went, and the agent reports no steps of it.
			report(agentA, ws.Namespace, "Stopped", nil)
			if got := shown(); got[0].State != "done" || got[1].State != sdk.StepInterrupted || got[2].State != sdk.StepSkipped {
				t.Errorf("after a stop mid-build: %+v", got)
			}
		})
	}
}
