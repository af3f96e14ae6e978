package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// agentReport posts one partial reconcile to url with ws's Deployment in state st.
func agentReport(t *testing.T, url, token string, ws sdk.Workspace, st string, rv int) {
	t.Helper()
	env := &servertest.Env{URL: url}
	reconcileCall(t, env, token, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{
		{Name: ws.KubeName, Namespace: ws.Namespace, LatestK8sDeploymentInfo: deploymentIn(st, rv)}}})
}

const startsCount = `hangar_workspace_start_duration_seconds_count{backend="kubernetes"}`
const startsSum = `hangar_workspace_start_duration_seconds_sum{backend="kubernetes"}`

// The start latency is measured from the request to the first Running report, by whichever replica
// receives that report: the request's time is in the database (migration 19), not in the memory of
// the replica that took the request. Each start is observed once.
func TestStartLatencyAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	r := servertest.NewReplicas(t, 2)
	a, err := r.Admin.CreateAgent(ctx, sdk.CreateAgentRequest{Name: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := r.Admin.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "w", Agent: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	r.Clock.Advance(3 * time.Second)
	agentReport(t, r.URLs[1], a.Token, ws, "Starting", 1)
	r.Clock.Advance(4 * time.Second)
	agentReport(t, r.URLs[1], a.Token, ws, "Running", 2)
	if c, s := metricValue(t, r.URLs[1], startsCount), metricValue(t, r.URLs[1], startsSum); c != "1" || s != "7" {
		t.Fatalf("replica 1 (got the Running report): count %q sum %q, want 1 start of 7 s", c, s)
	}
	if c := metricValue(t, r.URLs[0], startsCount); c != "0" {
		t.Fatalf("replica 0 (got the request) counts %q starts, want 0", c)
	}
	// Running again (a full report, another replica): not a new start.
	r.Clock.Advance(time.Second)
	agentReport(t, r.URLs[0], a.Token, ws, "Running", 3)
	agentReport(t, r.URLs[1], a.Token, ws, "Running", 4)
	// Its pod rescheduled: Starting, then Running again, with no start asked for.
	agentReport(t, r.URLs[0], a.Token, ws, "Starting", 5)
	r.Clock.Advance(time.Minute)
	agentReport(t, r.URLs[1], a.Token, ws, "Running", 6)
	if c0, c1 := metricValue(t, r.URLs[0], startsCount), metricValue(t, r.URLs[1], startsCount); c0 != "0" || c1 != "1" {
		t.Fatalf("a workspace that stays Running, or comes back by itself, is counted again: %s + %s", c0, c1)
	}
}

// On each store: a stop before the workspace ran drops its start (not measured); a restart is
// measured from the restart request, through its stop, to Running.
func TestStartLatencyStopAndRestart(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			token := createAgent(t, env, "k1", nil)
			var ws sdk.Workspace
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "agent": "k1"}, 201, &ws)
			env.Clock.Advance(2 * time.Second)
			mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/workspaces/w", map[string]string{"desired_state": "Stopped"}, 200, nil)
			agentReport(t, env.URL, token, ws, "Stopped", 1)
			env.Clock.Advance(10 * time.Second)
			if c := metricValue(t, env.URL, startsCount); c != "0" {
				t.Fatalf("a start stopped before it ran is counted: %q", c)
			}
			// The start below is measured from its own request (5 s), not from the create (17 s).
			mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/workspaces/w", map[string]string{"desired_state": "Running"}, 200, nil)
			agentReport(t, env.URL, token, ws, "Stopped", 3)
			env.Clock.Advance(5 * time.Second)
			agentReport(t, env.URL, token, ws, "Running", 4)
			if c, s := metricValue(t, env.URL, startsCount), metricValue(t, env.URL, startsSum); c != "1" || s != "5" {
				t.Fatalf("start: count %q sum %q, want 1 of 5 s", c, s)
			}
			env.Clock.Advance(time.Second) // (a change in the microsecond of a response is stamped 1 µs after it)
			mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/workspaces/w", map[string]string{"desired_state": "RestartRequested"}, 200, nil)
			env.Clock.Advance(2 * time.Second)
			agentReport(t, env.URL, token, ws, "Stopped", 5) // the restart's second leg: desired Running again
			env.Clock.Advance(3 * time.Second)
			agentReport(t, env.URL, token, ws, "Running", 6)
			if c, s := metricValue(t, env.URL, startsCount), metricValue(t, env.URL, startsSum); c != "2" || s != "10" {
				t.Fatalf("after a restart: count %q sum %q, want 2 starts, 5 s + 5 s", c, s)
			}
			// Three workspaces Running in one report: each measured (one DELETE for the batch).
			var infos []protocol.WorkspaceAgentInfo
			for _, n := range []string{"w2", "w3", "w4"} {
				var w sdk.Workspace
				mustCall(t, env, env.AdminToken, "POST", "/api/v1/workspaces", map[string]any{"name": n, "agent": "k1"}, 201, &w)
				infos = append(infos, protocol.WorkspaceAgentInfo{Name: w.KubeName, Namespace: w.Namespace, LatestK8sDeploymentInfo: deploymentIn("Running", 7)})
			}
			env.Clock.Advance(4 * time.Second)
			reconcileCall(t, env, token, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: infos})
			if c, s := metricValue(t, env.URL, startsCount), metricValue(t, env.URL, startsSum); c != "5" || s != "22" {
				t.Fatalf("after three at once: count %q sum %q, want 5 starts, 10 s + 3 × 4 s", c, s)
			}
		})
	}
}

// HTTP requests are counted by the route pattern they matched, never the raw path (a label per
// workspace name would grow without bound), and by status code; the database pool is exported.
func TestHTTPAndPoolMetrics(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			for _, name := range []string{"nosuch-1", "nosuch-2"} {
				if status, _ := call(t, env, env.AdminToken, "GET", "/api/v1/workspaces/"+name, nil); status != http.StatusNotFound {
					t.Fatalf("GET %s: %d", name, status)
				}
			}
			call(t, env, env.AdminToken, "GET", "/api/v1/workspaces", nil)
			scrape(t, env.URL)
			if v := metricValue(t, env.URL, `hangar_http_requests_total{code="404",method="GET",route="/api/v1/workspaces/{name}"}`); v != "2" {
				t.Errorf("404s of GET /api/v1/workspaces/{name}: %q, want 2", v)
			}
			if v := metricValue(t, env.URL, `hangar_http_request_duration_seconds_count{code="200",method="GET",route="/api/v1/workspaces"}`); v != "1" {
				t.Errorf("timed GET /api/v1/workspaces: %q, want 1", v)
			}
			if v := metricValue(t, env.URL, `hangar_http_requests_total{code="200",method="GET",route="/metrics"}`); v == "" {
				t.Errorf("the scrape itself is not counted")
			}
			body := scrape(t, env.URL)
			if strings.Contains(body, "nosuch-1") {
				t.Errorf("a raw path is a label value")
			}
			if v := metricValue(t, env.URL, `go_sql_max_open_connections{db_name="hangar"}`); v == "" || (engine == "sqlite" && v != "8") {
				t.Errorf("pool size %q", v)
			}
			for _, m := range []string{"go_sql_open_connections", "go_sql_in_use_connections", "go_sql_idle_connections", "go_sql_wait_count_total", "go_sql_wait_duration_seconds_total"} {
				if metricValue(t, env.URL, m+`{db_name="hangar"}`) == "" {
					t.Errorf("no %s", m)
				}
			}
		})
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}

// Terraform, with the real terraform: the start is measured from the create to the build that made
// the workspace Running (the provisioner picks it up 30 s later here), a stop and start is a new
// start, and so is an update of the running workspace (a restart: a stop and a start build), each
// counted once.
func TestStartLatencyTerraform(t *testing.T) {
	env := servertest.NewTF(t, "sqlite", 0)
	env.PushModule("vm", map[string]string{"main.tf": "variable \"start_count\" {\n  type = number\n}\n"})
	ctx := env.Ctx
	if _, err := env.Dev.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "tf1", Template: "vm"}); err != nil {
		t.Fatal(err)
	}
	env.Clock.Advance(30 * time.Second)
	env.StartProvisioner()
	env.WaitBuilds(1)
	const count, sum = `hangar_workspace_start_duration_seconds_count{backend="terraform"}`, `hangar_workspace_start_duration_seconds_sum{backend="terraform"}`
	if c, s := metricValue(t, env.URL, count), metricValue(t, env.URL, sum); c != "1" || s != "30" {
		t.Fatalf("after the create: count %q sum %q, want 1 start of 30 s", c, s)
	}
	env.PushModule("vm", map[string]string{"main.tf": "variable \"start_count\" {\n  type = number\n}\noutput \"v\" {\n  value = 2\n}\n"})
	if _, err := env.Dev.UpdateWorkspaceVersion(ctx, "tf1", sdk.UpdateWorkspaceVersionRequest{}); err != nil {
		t.Fatal(err)
	}
	for _, b := range env.WaitBuilds(2) {
		if b.Job.Status() != "succeeded" {
			t.Fatalf("update build %d %s: %s", b.Number, b.Transition, b.Job.Error)
		}
	}
	if c := metricValue(t, env.URL, count); c != "2" {
		t.Fatalf("after an update (a restart): %q starts, want 2", c)
	}
	for _, desired := range []string{"Stopped", "Running"} {
		if _, err := env.Dev.UpdateWorkspace(ctx, "tf1", sdk.UpdateWorkspaceRequest{DesiredState: desired}); err != nil {
			t.Fatal(err)
		}
		env.WaitBuilds(1)
	}
	if c := metricValue(t, env.URL, count); c != "3" {
		t.Fatalf("stop and start: %q starts, want 3", c)
	}
}
