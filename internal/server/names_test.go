package server_test

import (
	"net/http"
	"testing"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestNamesPerOwnerThroughTheAgent: two owners' dev on one agent get configs of their own, the
// agent's reports of each change only that one, and a dev deleted (Terminated) leaves the list,
// shows with all=true, and may be created again while the old one's name stays in the answer history.
func TestNamesPerOwnerThroughTheAgent(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			agent := createAgent(t, env, "k1", map[string]any{"namespace_mode": "shared", "shared_namespace": "team"})
			alice, bob := createUser(t, env, "alice"), createUser(t, env, "bob")
			var wa, wb sdk.Workspace
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "dev", "agent": "k1"}, http.StatusCreated, &wa)
			mustCall(t, env, bob, "POST", "/api/v1/workspaces", map[string]any{"name": "dev", "agent": "k1"}, http.StatusCreated, &wb)
			if wa.Namespace != "team" || wb.Namespace != "team" || wa.KubeName == wb.KubeName {
				t.Fatalf("two dev in one shared namespace: %s/%s and %s/%s", wa.Namespace, wa.KubeName, wb.Namespace, wb.KubeName)
			}
			resp := reconcileCall(t, env, agent, protocol.ReconcileRequest{UpdateType: protocol.UpdateFull, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
			configs := map[string]string{}
			for _, i := range resp.WorkspaceRailsInfos {
				configs[i.Name] = i.ConfigToApply
			}
			if len(configs) != 2 || configs[wa.KubeName] == "" || configs[wb.KubeName] == "" || configs[wa.KubeName] == configs[wb.KubeName] {
				t.Fatalf("answer %+v, want a config for each dev", resp.WorkspaceRailsInfos)
			}
			// Bob's dev runs; Alice's is untouched.
			env.Clock.Advance(1e9)
			rb := protocol.WorkspaceAgentInfo{Name: wb.KubeName, Namespace: wb.Namespace, LatestK8sDeploymentInfo: deploymentIn("Running", 7)}
			reconcileCall(t, env, agent, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{rb}})
			var got sdk.Workspace
			mustCall(t, env, bob, "GET", "/api/v1/workspaces/dev", nil, http.StatusOK, &got)
			if got.ActualState != "Running" {
				t.Errorf("bob's dev after its report: %s", got.ActualState)
			}
			mustCall(t, env, alice, "GET", "/api/v1/workspaces/dev", nil, http.StatusOK, &got)
			if got.ActualState != "CreationRequested" {
				t.Errorf("alice's dev after bob's report: %s", got.ActualState)
			}

			// Alice deletes hers: the name stays taken until the agent reports it gone.
			mustCall(t, env, alice, "PATCH", "/api/v1/workspaces/dev", map[string]string{"desired_state": "Terminated"}, http.StatusOK, nil)
			if status, body := call(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "dev", "agent": "k1"}); status != http.StatusConflict {
				t.Fatalf("dev again while the first is being deleted: %d %s, want 409", status, body)
			}
			env.Clock.Advance(1e9)
			gone := protocol.WorkspaceAgentInfo{Name: wa.KubeName, Namespace: wa.Namespace, TerminationProgress: protocol.TerminationTerminated}
			reconcileCall(t, env, agent, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{gone}})
			var list []sdk.Workspace
			mustCall(t, env, alice, "GET", "/api/v1/workspaces", nil, http.StatusOK, &list)
			if len(list) != 0 {
				t.Errorf("alice's list after the delete: %+v", list)
			}
			mustCall(t, env, alice, "GET", "/api/v1/workspaces?all=true", nil, http.StatusOK, &list)
			if len(list) != 1 || list[0].ActualState != "Terminated" {
				t.Errorf("alice's list with all: %+v", list)
			}
			var again sdk.Workspace
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "dev", "agent": "k1"}, http.StatusCreated, &again)
			if again.KubeName == wa.KubeName || again.URL != wa.URL {
				t.Errorf("dev again: cluster name %q (was %q), URL %q (was %q): want a new cluster name and the same URL", again.KubeName, wa.KubeName, again.URL, wa.URL)
			}
			mustCall(t, env, alice, "GET", "/api/v1/workspaces/dev", nil, http.StatusOK, &got)
			if got.ID != again.ID {
				t.Errorf("dev names %s, want the new one %s", got.ID, again.ID)
			}
			mustCall(t, env, env.AdminToken, "GET", "/api/v1/workspaces?all=1", nil, http.StatusOK, &list)
			if len(list) != 3 {
				t.Errorf("admin's list with all: %d workspaces, want 3", len(list))
			}
		})
	}
}

// TestTerraformNameFreeAfterDelete: a terraform workspace's name is free again once its delete
// build succeeded, and another owner may use it meanwhile.
func TestTerraformNameFreeAfterDelete(t *testing.T) {
	te := newTFEnv(t, "sqlite")
	env := te.Env
	alice, bob := createUser(t, env, "alice"), createUser(t, env, "bob")
	p := worker{t, env, te.Prov, "host-1"}
	mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "vm", "template": "tf"}, http.StatusCreated, nil)
	mustCall(t, env, bob, "POST", "/api/v1/workspaces", map[string]any{"name": "vm", "template": "tf"}, http.StatusCreated, nil)
	p.run("vm", 1, protocol.FinishRequest{State: tfState(1)})
	p.run("vm", 1, protocol.FinishRequest{State: tfState(1)})
	if status, body := call(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "vm", "template": "tf"}); status != http.StatusConflict {
		t.Fatalf("a second vm of alice: %d %s", status, body)
	}
	newBuild(t, env, alice, "vm", sdk.CreateBuildRequest{Transition: "delete"})
	p.run("vm", 2, protocol.FinishRequest{})
	if ws := getWorkspace(t, env, alice, "vm"); ws.ActualState != "Terminated" {
		t.Fatalf("alice's vm after its delete: %s", ws.ActualState)
	}
	var again sdk.Workspace
	mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "vm", "template": "tf"}, http.StatusCreated, &again)
	if ws := getWorkspace(t, env, alice, "vm"); ws.ID != again.ID || ws.ActualState != "Starting" {
		t.Errorf("vm after re-creation: %+v", ws)
	}
	if ws := getWorkspace(t, env, bob, "vm"); ws.ActualState != "Running" {
		t.Errorf("bob's vm: %s", ws.ActualState)
	}
}
