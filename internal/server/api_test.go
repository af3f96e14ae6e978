package server_test

import (
	"io"
	"log/slog"
	"net/http/httptest"

	"encoding/json"
	"github.com/hangar-dev/hangar/internal/server"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/workspace"
)

func TestBootstrapWritesAdminToken(t *testing.T) {
	env := servertest.New(t)
	info, err := os.Stat(env.DataDir + "/admin-token")
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("admin-token mode %v, want 0600", info.Mode().Perm())
	}
	var me sdk.User
	mustCall(t, env, env.AdminToken, "GET", "/api/v1/users/me", nil, http.StatusOK, &me)
	if me.Username != "admin" || !me.Admin {
		t.Errorf("me = %+v", me)
	}
	// A second bootstrap of the same store creates nothing.
	_, created, err := env.Server.Bootstrap(t.Context(), t.TempDir())
	if err != nil || created {
		t.Errorf("second bootstrap: created=%v err=%v", created, err)
	}
}

func TestAuth(t *testing.T) {
	env := servertest.New(t)
	agentToken := createAgent(t, env, "k1", nil)
	userToken := createUser(t, env, "dev")
	tests := []struct {
		name, token, method, path string
		want                      int
	}{
		{"no token", "", "GET", "/api/v1/workspaces", 401},
		{"bad token", "hgu_nope", "GET", "/api/v1/workspaces", 401},
		{"agent token on user API", agentToken, "GET", "/api/v1/workspaces", 401},
		{"user token on reconcile", userToken, "POST", protocol.ReconcilePath, 401},
		{"non-admin creates user", userToken, "POST", "/api/v1/users", 403},
		{"non-admin creates agent", userToken, "POST", "/api/v1/agents", 403},
		{"unknown endpoint", userToken, "GET", "/api/v1/nothing", 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := call(t, env, tc.token, tc.method, tc.path, `{"username":"x","name":"x"}`)
			if status != tc.want {
				t.Fatalf("status %d, want %d: %s", status, tc.want, body)
			}
			if e := apiError(t, body); e.Message == "" {
				t.Errorf("error without message: %s", body)
			}
		})
	}
}

func TestWorkspaceLifecycleAndVisibility(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			createAgent(t, env, "k1", map[string]any{"dns_zone": "ws.example.com"})
			alice := createUser(t, env, "alice")
			bob := createUser(t, env, "bob")

			var ws sdk.Workspace
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "proj", "agent": "k1"}, http.StatusCreated, &ws)
			if ws.DesiredState != "Running" || ws.ActualState != "CreationRequested" || ws.Owner != "alice" || ws.Agent != "k1" ||
				ws.KubeName != workspace.KubeName("proj", ws.ID) || ws.Namespace != "hangar-"+ws.KubeName ||
				ws.URL != "https://3000-proj--alice.ws.example.com/" || ws.RespondedToAgentAt != nil ||
				ws.ActualStateUpdatedAt != nil || ws.DeploymentResourceVersion != nil || ws.Error != nil || ws.DesiredStateUpdatedAt == nil {
				t.Fatalf("created %+v", ws)
			}
			// Bob sees nothing of Alice's: 404, not 403, whether he names her or not.
			for _, req := range []struct{ method, path string }{{"GET", "/api/v1/workspaces/proj"}, {"PATCH", "/api/v1/workspaces/proj"},
				{"GET", "/api/v1/workspaces/alice%2Fproj"}, {"PATCH", "/api/v1/workspaces/alice%2Fproj"}, {"GET", "/api/v1/workspaces/nobody%2Fproj"}} {
				status, body := call(t, env, bob, req.method, req.path, `{"desired_state":"Stopped"}`)
				if status != 404 {
					t.Errorf("bob %s %s: %d %s, want 404", req.method, req.path, status, body)
				}
			}
			// The owner may name herself; an admin names her.
			var got sdk.Workspace
			mustCall(t, env, alice, "GET", "/api/v1/workspaces/alice%2Fproj", nil, 200, &got)
			if got.ID != ws.ID {
				t.Errorf("alice/proj by alice = %s, want %s", got.ID, ws.ID)
			}
			mustCall(t, env, env.AdminToken, "GET", "/api/v1/workspaces/alice%2Fproj", nil, 200, &got)
			if got.ID != ws.ID || got.Ref() != "alice/proj" {
				t.Errorf("alice/proj by the admin = %+v", got)
			}
			if status, body := call(t, env, env.AdminToken, "GET", "/api/v1/workspaces/proj", nil); status != 404 {
				t.Errorf("proj by the admin (who has none): %d %s, want 404", status, body)
			}
			for _, bad := range []string{"alice%2Fproj%2Fx", "Alice%2Fproj", "%2Fproj", "alice%2F", "-x"} {
				status, body := call(t, env, alice, "GET", "/api/v1/workspaces/"+bad, nil)
				if e := apiError(t, body); status != 400 || len(e.Validations) == 0 || e.Validations[0].Field != "name" {
					t.Errorf("GET %s: %d %s, want 400 naming the field name", bad, status, body)
				}
			}
			var list []sdk.Workspace
			mustCall(t, env, bob, "GET", "/api/v1/workspaces", nil, 200, &list)
			if len(list) != 0 {
				t.Errorf("bob lists %d workspaces", len(list))
			}
			mustCall(t, env, env.AdminToken, "GET", "/api/v1/workspaces", nil, 200, &list)
			if len(list) != 1 {
				t.Errorf("admin lists %d workspaces, want 1", len(list))
			}
			// Names are per owner: Bob may have a proj too, Alice not two.
			var bobs sdk.Workspace
			mustCall(t, env, bob, "POST", "/api/v1/workspaces", map[string]any{"name": "proj", "agent": "k1"}, http.StatusCreated, &bobs)
			if bobs.KubeName == ws.KubeName || bobs.Namespace == ws.Namespace || bobs.URL != "https://3000-proj--bob.ws.example.com/" {
				t.Errorf("bob's proj shares alice's cluster identity or URL: %+v", bobs)
			}
			status, body := call(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "proj", "agent": "k1"})
			if status != 409 {
				t.Errorf("duplicate name: %d %s", status, body)
			}
			mustCall(t, env, env.AdminToken, "GET", "/api/v1/workspaces", nil, 200, &list)
			if len(list) != 2 || list[0].Ref() != "alice/proj" || list[1].Ref() != "bob/proj" {
				t.Errorf("admin lists %+v, want alice/proj and bob/proj", list)
			}
			// The admin acts on Bob's.
			mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/workspaces/bob%2Fproj", map[string]string{"desired_state": "Stopped"}, 200, &got)
			if got.ID != bobs.ID || got.DesiredState != "Stopped" {
				t.Errorf("admin's stop of bob/proj = %+v", got)
			}
			mustCall(t, env, alice, "GET", "/api/v1/workspaces/proj", nil, 200, &got)
			if got.DesiredState != "Running" {
				t.Errorf("stopping bob/proj changed alice's: %s", got.DesiredState)
			}

			mustCall(t, env, alice, "PATCH", "/api/v1/workspaces/proj", map[string]string{"desired_state": "Stopped"}, 200, &ws)
			if ws.DesiredState != "Stopped" {
				t.Errorf("after stop: %s", ws.DesiredState)
			}
			// Restarting a stopped workspace is refused with a reason.
			status, body = call(t, env, alice, "PATCH", "/api/v1/workspaces/proj", map[string]string{"desired_state": "RestartRequested"})
			if status != 409 || !strings.Contains(apiError(t, body).Detail, "start it instead") {
				t.Errorf("restart when stopped: %d %s", status, body)
			}
			mustCall(t, env, alice, "PATCH", "/api/v1/workspaces/proj", map[string]string{"desired_state": "Terminated"}, 200, &ws)
			// Deleting again succeeds and changes nothing.
			var again sdk.Workspace
			mustCall(t, env, alice, "PATCH", "/api/v1/workspaces/proj", map[string]string{"desired_state": "Terminated"}, 200, &again)
			if !again.DesiredStateUpdatedAt.Equal(*ws.DesiredStateUpdatedAt) {
				t.Errorf("repeated delete moved desired_state_updated_at: %v → %v", ws.DesiredStateUpdatedAt, again.DesiredStateUpdatedAt)
			}
			for _, to := range []string{"Running", "Stopped", "RestartRequested"} {
				status, body := call(t, env, alice, "PATCH", "/api/v1/workspaces/proj", map[string]string{"desired_state": to})
				if status != 409 || !strings.Contains(apiError(t, body).Detail, "permanent") {
					t.Errorf("%s after Terminated: %d %s, want 409", to, status, body)
				}
			}
		})
	}
}

// TestBadBodies sends each kind of bad input and checks the error names the field and nothing was
// written.
func TestBadBodies(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			agentToken := createAgent(t, env, "k1", nil)
			otherAgent := createAgent(t, env, "k2", nil)
			createAgent(t, env, "small", map[string]any{"max_resources_per_workspace": map[string]any{"limits": map[string]string{"memory": "8Gi"}}})
			user := createUser(t, env, "dev")
			longUser := createUser(t, env, strings.Repeat("u", workspace.MaxUsernameLength))
			mustCall(t, env, user, "POST", "/api/v1/workspaces", map[string]any{"name": "mine", "agent": "k1"}, 201, nil)
			before := snapshot(t, env, user)

			big := `{"name":"x","agent":"k1","devfile":"` + strings.Repeat("a", sdk.MaxBodyBytes) + `"}`
			bigReconcile := `{"update_type":"partial","workspace_agent_infos":[],"pad":"` + strings.Repeat("a", protocol.MaxReconcileBodyBytes) + `"}`
			tests := []struct {
				name, token, method, path, body string
				status                          int
				field                           string
			}{
				{"malformed JSON", user, "POST", "/api/v1/workspaces", `{"name": "x",`, 400, "body"},
				{"trailing data", user, "POST", "/api/v1/workspaces", `{"name":"x","agent":"k1"} {}`, 400, "body"},
				{"unknown field", user, "POST", "/api/v1/workspaces", `{"name":"x","agent":"k1","colour":"red"}`, 400, "colour"},
				{"wrong type", user, "POST", "/api/v1/workspaces", `{"name":7,"agent":"k1"}`, 400, "name"},
				{"bad name", user, "POST", "/api/v1/workspaces", `{"name":"Not_A_Label","agent":"k1"}`, 400, "name"},
				{"unknown agent", user, "POST", "/api/v1/workspaces", `{"name":"x","agent":"nope"}`, 400, "agent"},
				{"name with the URL separator", user, "POST", "/api/v1/workspaces", `{"name":"a--b","agent":"k1"}`, 400, "name"},
				{"name too long for the owner's URL", longUser, "POST", "/api/v1/workspaces", `{"name":"` + strings.Repeat("n", 40) + `","agent":"k1"}`, 400, "name"},
				{"bad workspace reference", user, "PATCH", "/api/v1/workspaces/a%2Fb%2Fc", `{"desired_state":"Stopped"}`, 400, "name"},
				{"bad all", user, "GET", "/api/v1/workspaces?all=maybe", "", 400, "all"},
				{"username with the URL separator", env.AdminToken, "POST", "/api/v1/users", `{"username":"a--b"}`, 400, "username"},
				{"username too long", env.AdminToken, "POST", "/api/v1/users", `{"username":"` + strings.Repeat("u", 33) + `"}`, 400, "username"},
				{"bad devfile", user, "POST", "/api/v1/workspaces", `{"name":"x","agent":"k1","devfile":"schemaVersion: 1.0.0\ncomponents: []"}`, 400, "devfile.schemaVersion"},
				{"devfile over the agent's max resources", user, "POST", "/api/v1/workspaces",
					`{"name":"x","agent":"small","devfile":"schemaVersion: 2.2.0\ncomponents:\n- name: main\n  container:\n    image: alpine\n    memoryLimit: 64Gi\n"}`, 400, "devfile.components"},
				{"oversized body", user, "POST", "/api/v1/workspaces", big, 413, ""},
				{"unknown desired state", user, "PATCH", "/api/v1/workspaces/mine", `{"desired_state":"Paused"}`, 400, "desired_state"},
				{"actual-only state as desired", user, "PATCH", "/api/v1/workspaces/mine", `{"desired_state":"Starting"}`, 400, "desired_state"},
				{"bad agent config", env.AdminToken, "POST", "/api/v1/agents", `{"name":"k3","config":{"workspaces_quota":-5}}`, 400, "config.workspaces_quota"},
				{"agent config unknown field", env.AdminToken, "POST", "/api/v1/agents", `{"name":"k3","config":{"dns_zon":"x"}}`, 400, "config.dns_zon"},
				{"reserved label", env.AdminToken, "POST", "/api/v1/agents", `{"name":"k3","config":{"labels":{"hangar.dev/x":"y"}}}`, 400, "config.labels"},
				{"reconcile malformed JSON", agentToken, "POST", protocol.ReconcilePath, `{"update_type":`, 400, "body"},
				{"reconcile unknown update_type", agentToken, "POST", protocol.ReconcilePath, `{"update_type":"delta","workspace_agent_infos":[]}`, 400, "update_type"},
				{"reconcile missing infos", agentToken, "POST", protocol.ReconcilePath, `{"update_type":"full"}`, 400, "workspace_agent_infos"},
				{"reconcile unknown termination", agentToken, "POST", protocol.ReconcilePath,
					`{"update_type":"partial","workspace_agent_infos":[{"name":"mine","namespace":"hangar-mine","termination_progress":"Gone"}]}`, 400, "workspace_agent_infos[0].termination_progress"},
				{"reconcile unknown error type", agentToken, "POST", protocol.ReconcilePath,
					`{"update_type":"partial","workspace_agent_infos":[{"name":"mine","namespace":"hangar-mine","error_details":{"error_type":"cosmic","error_message":"x"}}]}`, 400, "workspace_agent_infos[0].error_details.error_type"},
				{"reconcile duplicate workspace", agentToken, "POST", protocol.ReconcilePath,
					`{"update_type":"partial","workspace_agent_infos":[{"name":"mine","namespace":"hangar-mine"},{"name":"mine","namespace":"hangar-mine"}]}`, 400, "workspace_agent_infos[1].name"},
				{"reconcile oversized", agentToken, "POST", protocol.ReconcilePath, bigReconcile, 413, ""},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					status, body := call(t, env, tc.token, tc.method, tc.path, tc.body)
					if status != tc.status {
						t.Fatalf("status %d, want %d: %s", status, tc.status, body)
					}
					e := apiError(t, body)
					if e.Message == "" {
						t.Errorf("no message: %s", body)
					}
					if tc.field != "" {
						found := false
						for _, v := range e.Validations {
							if v.Field == tc.field && v.Detail != "" {
								found = true
							}
						}
						if !found {
							t.Errorf("no validation naming %q: %s", tc.field, body)
						}
					}
					if after := snapshot(t, env, user); after != before {
						t.Errorf("something was written:\nbefore %s\nafter  %s", before, after)
					}
				})
			}

			// Another agent's reconcile neither sees nor changes this agent's workspace: it is an
			// orphan to it, answered Terminated, and the row is untouched.
			resp := reconcileCall(t, env, otherAgent, protocol.ReconcileRequest{UpdateType: protocol.UpdateFull, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{
				{Name: "mine", Namespace: "hangar-mine", LatestK8sDeploymentInfo: deploymentIn("Running", 9)},
			}})
			if len(resp.WorkspaceRailsInfos) != 1 || resp.WorkspaceRailsInfos[0].DesiredState != "Terminated" || resp.WorkspaceRailsInfos[0].ConfigToApply != "" {
				t.Errorf("other agent's answer: %+v", resp.WorkspaceRailsInfos)
			}
			if after := snapshot(t, env, user); after != before {
				t.Errorf("another agent's report changed the workspace:\nbefore %s\nafter  %s", before, after)
			}
			// And its full reconcile does not list it.
			resp = reconcileCall(t, env, otherAgent, protocol.ReconcileRequest{UpdateType: protocol.UpdateFull, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
			if len(resp.WorkspaceRailsInfos) != 0 {
				t.Errorf("other agent's full reconcile lists %+v", resp.WorkspaceRailsInfos)
			}
		})
	}
}

// snapshot is everything the user and admin can see, as one string.
func snapshot(t *testing.T, env *servertest.Env, user string) string {
	t.Helper()
	var ws []sdk.Workspace
	mustCall(t, env, env.AdminToken, "GET", "/api/v1/workspaces", nil, 200, &ws)
	var agents []sdk.Agent
	mustCall(t, env, env.AdminToken, "GET", "/api/v1/agents", nil, 200, &agents)
	b, _ := json.Marshal(map[string]any{"workspaces": ws, "agents": len(agents)})
	return string(b)
}

func TestFullReconcileAndOrphans(t *testing.T) {
	env := servertest.New(t)
	agentToken := createAgent(t, env, "k1", map[string]any{"partial_reconciliation_interval_seconds": 5})
	user := createUser(t, env, "dev")
	for _, n := range []string{"a", "b", "c"} {
		mustCall(t, env, user, "POST", "/api/v1/workspaces", map[string]any{"name": n, "agent": "k1"}, 201, nil)
	}
	// The agent names workspaces by cluster name and namespace.
	ia, ib, ic := infoOf(t, env, "a"), infoOf(t, env, "b"), infoOf(t, env, "c")
	key := func(i protocol.WorkspaceAgentInfo) string { return i.Name + "/" + i.Namespace }
	ghost := protocol.WorkspaceAgentInfo{Name: "ghost", Namespace: "hangar-ghost", LatestK8sDeploymentInfo: deploymentIn("Running", 11)}
	wrongNS := protocol.WorkspaceAgentInfo{Name: ib.Name, Namespace: "wrong-namespace", LatestK8sDeploymentInfo: deploymentIn("Running", 12)}
	byName := protocol.WorkspaceAgentInfo{Name: "c", Namespace: ic.Namespace, LatestK8sDeploymentInfo: deploymentIn("Running", 14)} // its name, not its cluster name
	ra := ia
	ra.LatestK8sDeploymentInfo = deploymentIn("Running", 10)
	full := protocol.ReconcileRequest{UpdateType: protocol.UpdateFull, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{ra, ghost, wrongNS, byName}}
	resp := reconcileCall(t, env, agentToken, full)
	if resp.Settings.PartialReconciliationIntervalSeconds != 5 || resp.Settings.FullReconciliationIntervalSeconds != 3600 {
		t.Errorf("settings %+v", resp.Settings)
	}
	got := map[string]protocol.WorkspaceRailsInfo{}
	for _, info := range resp.WorkspaceRailsInfos {
		got[info.Name+"/"+info.Namespace] = info
	}
	if len(got) != 6 {
		t.Fatalf("answered %d workspaces, want a, b, c and three orphans: %+v", len(got), resp.WorkspaceRailsInfos)
	}
	if a := got[key(ia)]; a.ActualState != "Running" || a.DeploymentResourceVersion != "10" || a.ConfigToApply == "" {
		t.Errorf("a: %+v", a)
	}
	for _, k := range []string{key(ib), key(ic)} {
		if w := got[k]; w.ConfigToApply == "" || w.DesiredState != "Running" {
			t.Errorf("%s on full reconcile: %+v", k, w)
		}
	}
	for _, k := range []string{key(ghost), key(wrongNS), key(byName)} {
		if o := got[k]; o.DesiredState != "Terminated" || o.ConfigToApply != "" || o.DeploymentResourceVersion == "" {
			t.Errorf("orphan %s: %+v", k, o)
		}
	}
	// Metrics count the orphans.
	status, body := call(t, env, "", "GET", "/metrics", nil)
	if status != 200 || !strings.Contains(string(body), "hangar_reconcile_orphans_total 3") ||
		!strings.Contains(string(body), `hangar_workspaces{actual_state="Running",desired_state="Running"} 1`) ||
		!strings.Contains(string(body), `hangar_reconcile_duration_seconds_count{update_type="full"} 1`) {
		t.Errorf("metrics:\n%s", body)
	}
	// A full reconcile in steady state sends no config; one whose Deployment has the wrong replica
	// count (an apply lost in a crash) gets its config again.
	env.Clock.Advance(10e9)
	stale := deploymentIn("Stopped", 13) // replicas 0 while desired Running
	rb := ib
	rb.LatestK8sDeploymentInfo = stale
	resp = reconcileCall(t, env, agentToken, protocol.ReconcileRequest{UpdateType: protocol.UpdateFull, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{ra, rb}})
	for _, info := range resp.WorkspaceRailsInfos {
		wantConfig := info.Name != ia.Name // b drifted, c is missing from the agent
		if (info.ConfigToApply != "") != wantConfig {
			t.Errorf("steady full reconcile: %s config included = %v, want %v", info.Name, info.ConfigToApply != "", wantConfig)
		}
	}
	// Nothing changed: a partial reconcile answers nothing.
	env.Clock.Advance(10e9)
	resp = reconcileCall(t, env, agentToken, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
	if len(resp.WorkspaceRailsInfos) != 0 {
		t.Errorf("quiet partial answered %+v", resp.WorkspaceRailsInfos)
	}
	// A fully terminated workspace leaves the full answer.
	mustCall(t, env, user, "PATCH", "/api/v1/workspaces/c", map[string]string{"desired_state": "Terminated"}, 200, nil)
	env.Clock.Advance(10e9)
	tc := ic
	tc.TerminationProgress = "Terminated"
	reconcileCall(t, env, agentToken, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{tc}})
	resp = reconcileCall(t, env, agentToken, protocol.ReconcileRequest{UpdateType: protocol.UpdateFull, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
	for _, info := range resp.WorkspaceRailsInfos {
		if info.Name == ic.Name {
			t.Errorf("fully terminated workspace in full answer: %+v", info)
		}
	}
	if len(resp.WorkspaceRailsInfos) != 2 {
		t.Errorf("full answer has %d workspaces, want a and b", len(resp.WorkspaceRailsInfos))
	}
}

func TestHealth(t *testing.T) {
	env := servertest.New(t)
	for _, p := range []string{"/healthz", "/readyz"} {
		if status, body := call(t, env, "", "GET", p, nil); status != 200 {
			t.Errorf("%s: %d %s", p, status, body)
		}
	}
}

// TestErrorSuppressedAfterDesiredChange: an error the agent reports for a workspace whose desired
// state changed since the last response belongs to the previous action, so it is not shown
// (tracking-applier-errors.md, "Changes in Rails"); the same error after the response is.
func TestErrorSuppressedAfterDesiredChange(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			agent := createAgent(t, env, "k1", nil)
			user := createUser(t, env, "dev")
			mustCall(t, env, user, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "agent": "k1"}, 201, nil)
			env.Clock.Advance(time.Minute)
			reconcileCall(t, env, agent, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
			env.Clock.Advance(time.Minute)
			mustCall(t, env, user, "PATCH", "/api/v1/workspaces/w", map[string]string{"desired_state": "Stopped"}, 200, nil)
			env.Clock.Advance(time.Minute)
			iw := infoOf(t, env, "w")
			iw.ErrorDetails = &protocol.ErrorDetails{ErrorType: "applier", ErrorMessage: "quota exceeded"}
			report := protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{iw}}
			resp := reconcileCall(t, env, agent, report)
			var ws sdk.Workspace
			mustCall(t, env, user, "GET", "/api/v1/workspaces/w", nil, 200, &ws)
			if ws.ActualState != "CreationRequested" || ws.Error != nil || resp.WorkspaceRailsInfos[0].ConfigToApply == "" {
				t.Fatalf("stale error shown: actual %s error %+v", ws.ActualState, ws.Error)
			}
			env.Clock.Advance(time.Minute)
			reconcileCall(t, env, agent, report)
			mustCall(t, env, user, "GET", "/api/v1/workspaces/w", nil, 200, &ws)
			if ws.ActualState != "Error" || ws.Error == nil || ws.Error.Message != "quota exceeded" {
				t.Fatalf("current error not shown: actual %s error %+v", ws.ActualState, ws.Error)
			}
		})
	}
}

// TestRestartedServerGeneratesConfig: a server that did not create a workspace (another replica, or
// after a restart) reads its devfile from the store to generate its config.
func TestRestartedServerGeneratesConfig(t *testing.T) {
	env := servertest.New(t)
	agent := createAgent(t, env, "k1", nil)
	user := createUser(t, env, "dev")
	mustCall(t, env, user, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "agent": "k1"}, 201, nil)
	fresh := server.New(server.Options{Store: env.Store, Clock: env.Clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	hs := httptest.NewServer(fresh.Handler())
	defer hs.Close()
	other := *env
	other.URL = hs.URL
	resp := reconcileCall(t, &other, agent, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
	if len(resp.WorkspaceRailsInfos) != 1 || !strings.Contains(resp.WorkspaceRailsInfos[0].ConfigToApply, "kind: Deployment") {
		t.Fatalf("fresh server's answer: %+v", resp.WorkspaceRailsInfos)
	}
}

// TestDevfileWarningsAndCaps: what Hangar accepts but ignores is said in the create and update
// answers; an agent whose caps are below its defaults is told so at registration; and a workspace
// created without a devfile fits the caps (gitlab-style issue 8: a cap of 1 CPU refused them all).
func TestDevfileWarningsAndCaps(t *testing.T) {
	env := servertest.NewWith(t, servertest.Engines[0])
	var ag sdk.Agent
	mustCall(t, env, env.AdminToken, "POST", "/api/v1/agents", map[string]any{"name": "small", "config": map[string]any{
		"max_resources_per_workspace": map[string]any{"limits": map[string]any{"cpu": "1"}},
		"node_selector":               map[string]any{"type": "kwok"},
		"tolerations":                 []any{map[string]any{"key": "kwok.x-k8s.io/node", "operator": "Equal", "value": "fake", "effect": "NoSchedule"}},
	}}, http.StatusCreated, &ag)
	if len(ag.Warnings) != 1 || !strings.Contains(ag.Warnings[0], "max_resources_per_workspace limits.cpu 1 is below default_resources_per_workspace_container limits.cpu 2") {
		t.Errorf("agent warnings %q, want one about limits.cpu", ag.Warnings)
	}
	alice := createUser(t, env, "alice")
	var ws sdk.Workspace
	mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "plain", "agent": "small"}, http.StatusCreated, &ws)
	if len(ws.Warnings) != 0 {
		t.Errorf("default devfile warnings %q, want none", ws.Warnings)
	}
	devfile := "schemaVersion: 2.2.2\nstarterProjects:\n  - name: s\n    git: {remotes: {origin: https://example.com/s.git}}\ncomponents:\n  - name: main\n    container:\n      image: busybox\n      endpoints:\n        - {name: debug, targetPort: 5858, exposure: none}\n        - {name: web, targetPort: 8080, path: /ui}\n"
	mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "starter", "agent": "small", "devfile": devfile}, http.StatusCreated, &ws)
	if len(ws.Warnings) != 1 || !strings.Contains(ws.Warnings[0], "starterProjects") {
		t.Errorf("create warnings %q, want one about starterProjects", ws.Warnings)
	}
	if ws.URL != "https://8080-starter--alice.workspaces.localhost/ui" {
		t.Errorf("URL %q, want the public endpoint's (never the debugger's), with its path", ws.URL)
	}
	mustCall(t, env, alice, "PATCH", "/api/v1/workspaces/starter", map[string]any{"desired_state": "Stopped"}, http.StatusOK, &ws)
	if len(ws.Warnings) != 1 {
		t.Errorf("update warnings %q, want the devfile's again", ws.Warnings)
	}
	var list []sdk.Workspace
	mustCall(t, env, alice, "GET", "/api/v1/workspaces", nil, http.StatusOK, &list)
	for _, w := range list {
		if len(w.Warnings) != 0 {
			t.Errorf("list shows warnings %q; they belong to create and update answers", w.Warnings)
		}
	}
}

// An agent whose proxy listens on a port of its own (proxy_url_port) gets workspace URLs with that
// port, which `hangar show` and the page print: the URL works as printed.
func TestWorkspaceURLCarriesTheProxyPort(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			createAgent(t, env, "local", map[string]any{"dns_zone": "ws.example.com", "proxy_url_scheme": "http", "proxy_url_port": 8443})
			alice := createUser(t, env, "alice")
			var ws sdk.Workspace
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "proj", "agent": "local"}, http.StatusCreated, &ws)
			if ws.URL != "http://3000-proj--alice.ws.example.com:8443/" {
				t.Errorf("URL %q, want the proxy's port in it", ws.URL)
			}
			mustCall(t, env, alice, "GET", "/api/v1/workspaces/proj", nil, http.StatusOK, &ws)
			if ws.URL != "http://3000-proj--alice.ws.example.com:8443/" {
				t.Errorf("URL read back %q, want the proxy's port in it", ws.URL)
			}
			var out map[string]any
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/agents", map[string]any{"name": "bad", "config": map[string]any{"dns_zone": "b.example.com", "proxy_url_port": 70000}}, http.StatusBadRequest, &out)
			if b, _ := json.Marshal(out); !strings.Contains(string(b), "config.proxy_url_port") {
				t.Errorf("a port of 70000: %s, want an error naming config.proxy_url_port", b)
			}
		})
	}
}
