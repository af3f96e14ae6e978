package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// A workspace's helper reports its resources and custom metadata with its token: shown with the
// workspace while it runs; memory or a volume over its threshold raises an alert once, cleared
// when under again; kills for lack of memory raise an event per new kill; the report is written
// to the database at most once a minute (and at once when an alert changes); a bad report is a
// 400 naming the field; another workspace's token reports its own; after a restart the earlier
// run's figures are not shown, its alerts are (no longer active).
func TestHelperMetadata(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine, withHelperTokens)
			agentToken := createAgent(t, env, "k1", nil)
			dev := createUser(t, env, "dev")
			var app, other sdk.Workspace
			mustCall(t, env, dev, "POST", "/api/v1/workspaces", map[string]any{"name": "app", "agent": "k1"}, http.StatusCreated, &app)
			mustCall(t, env, dev, "POST", "/api/v1/workspaces", map[string]any{"name": "other", "agent": "k1"}, http.StatusCreated, &other)
			tokens := helperTokens(t, env, agentToken)
			for i, ws := range []sdk.Workspace{app, other} {
				reconcileCall(t, env, agentToken, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{
					{Name: ws.KubeName, Namespace: ws.Namespace, LatestK8sDeploymentInfo: deploymentIn("Running", i+1)}}})
			}
			detail := func(name string) sdk.Workspace {
				t.Helper()
				var ws sdk.Workspace
				mustCall(t, env, dev, "GET", "/api/v1/workspaces/"+name, nil, http.StatusOK, &ws)
				return ws
			}
			const gib = int64(1) << 30
			report := func(token string, memUsed int64, ooms int64, items ...protocol.MetadataValue) {
				t.Helper()
				rep := protocol.MetadataReport{CollectedAt: env.Clock.Now(), Resources: protocol.Resources{
					CPU:     &protocol.CPUUsage{UsedCores: 0.25, LimitCores: 2},
					Memory:  &protocol.MemoryUsage{UsedBytes: memUsed, LimitBytes: 2 * gib, Threshold: 90, OOMKills: ooms},
					Volumes: []protocol.VolumeUsage{{Path: "/projects", UsedBytes: 3 * gib, TotalBytes: 10 * gib, Threshold: 90}},
				}, Items: items}
				if status, body := call(t, env, token, "PUT", protocol.MetadataPath, rep); status != http.StatusOK {
					t.Fatalf("report: %d %s", status, body)
				}
			}
			kept := func() time.Time {
				t.Helper()
				_, at, err := env.Store.WorkspaceMetadata(context.Background(), app.ID)
				if err != nil {
					t.Fatal(err)
				}
				return at
			}
			first := env.Clock.Now()
			report(tokens[app.KubeName], gib/2, 0, protocol.MetadataValue{Key: "branch", DisplayName: "Branch", Value: "main"})
			ws := detail("app")
			r := ws.Resources
			if r == nil || r.CPU.UsedCores != 0.25 || r.Memory.UsedBytes != gib/2 || len(r.Volumes) != 1 || r.Volumes[0].UsedBytes != 3*gib ||
				len(r.History) != 1 || len(ws.Metadata) != 1 || ws.Metadata[0].Value != "main" || len(ws.Alerts) != 0 {
				t.Fatalf("after a report: resources %+v, metadata %+v, alerts %+v", r, ws.Metadata, ws.Alerts)
			}
			if d := detail("other"); d.Resources != nil || d.Metadata != nil {
				t.Fatalf("app's report shows on other: %+v", d.Resources)
			}
			// Ten seconds later: in memory, not written again.
			env.Clock.Advance(10 * time.Second)
			report(tokens[app.KubeName], gib, 0)
			if at := kept(); !at.Equal(first) {
				t.Fatalf("the report was written again after 10 s (kept at %v, first %v)", at, first)
			}
			if ws := detail("app"); ws.Resources.Memory.UsedBytes != gib || len(ws.Resources.History) != 2 {
				t.Fatalf("the latest report is not shown: %+v", ws.Resources)
			}
			// Memory over its threshold: one alert, written at once, however many reports say so.
			env.Clock.Advance(10 * time.Second)
			over := env.Clock.Now()
			report(tokens[app.KubeName], 2*gib-gib/10, 0)
			env.Clock.Advance(10 * time.Second)
			report(tokens[app.KubeName], 2*gib-gib/10, 0)
			if at := kept(); !at.Equal(over) {
				t.Fatalf("an alert's report was not written at once (kept at %v)", at)
			}
			ws = detail("app")
			if len(ws.Alerts) != 1 || ws.Alerts[0].Kind != "memory" || !ws.Alerts[0].Active || !ws.Alerts[0].RaisedAt.Equal(over) ||
				ws.Alerts[0].Detail != "memory at 95% of 2.0 GiB (threshold 90%)" {
				t.Fatalf("memory over its threshold: %+v", ws.Alerts)
			}
			// Under again: cleared. Two processes killed: one event.
			env.Clock.Advance(10 * time.Second)
			report(tokens[app.KubeName], gib, 2)
			env.Clock.Advance(10 * time.Second)
			report(tokens[app.KubeName], gib, 2)
			ws = detail("app")
			if len(ws.Alerts) != 2 || ws.Alerts[0].Kind != "oom-killed" || ws.Alerts[0].Detail != "2 process(es) in the workspace killed for lack of memory (limit 2.0 GiB)" ||
				ws.Alerts[1].Kind != "memory" || ws.Alerts[1].Active || ws.Alerts[1].ClearedAt == nil {
				t.Fatalf("after the kills: %+v", ws.Alerts)
			}
			// After a minute, written again.
			env.Clock.Advance(time.Minute)
			report(tokens[app.KubeName], gib, 2)
			if at := kept(); !at.Equal(env.Clock.Now()) {
				t.Fatalf("not written after a minute (kept at %v)", at)
			}
			for _, bad := range []struct {
				body  map[string]any
				field string
			}{
				{map[string]any{"items": []map[string]any{{"key": "Bad Key", "display_name": "x", "value": "1"}}}, "items[0].key"},
				{map[string]any{"resources": map[string]any{"volumes": []map[string]any{{"path": "projects", "used_bytes": 1, "total_bytes": 2}}}}, "resources.volumes[0].path"},
				{map[string]any{"resources": map[string]any{"memory": map[string]any{"used_bytes": 1, "threshold": 101}}}, "resources.memory"},
			} {
				status, body := call(t, env, tokens[other.KubeName], "PUT", protocol.MetadataPath, bad.body)
				var e sdk.Error
				_ = json.Unmarshal(body, &e)
				if status != http.StatusBadRequest || len(e.Validations) != 1 || e.Validations[0].Field != bad.field {
					t.Errorf("%v: %d %s, want a 400 naming %s", bad.body, status, body, bad.field)
				}
			}
			if status, _ := call(t, env, "hwa_not-a-token", "PUT", protocol.MetadataPath, map[string]any{}); status != http.StatusUnauthorized {
				t.Errorf("a bad token: %d, want 401", status)
			}
			// A value over its bound is cut.
			report(tokens[other.KubeName], 1, 0, protocol.MetadataValue{Key: "big", DisplayName: "Big", Value: strings.Repeat("é", protocol.MaxMetadataValueBytes)})
			if v := detail("other").Metadata[0].Value; len(v) > protocol.MaxMetadataValueBytes || !strings.HasPrefix(v, "éé") {
				t.Errorf("a long value: %d bytes", len(v))
			}
			// A restart: the earlier run's figures are not shown; its alerts are, not active.
			env.Clock.Advance(time.Minute)
			mustCall(t, env, dev, "PATCH", "/api/v1/workspaces/app", map[string]any{"desired_state": "RestartRequested"}, http.StatusOK, nil)
			if ws := detail("app"); ws.Resources != nil || len(ws.Alerts) != 2 {
				t.Errorf("after a restart: %+v, alerts %+v", ws.Resources, ws.Alerts)
			}
		})
	}
}

// oaMetadata: the helper's metadata report against the OpenAPI document (the workspace tfssh and
// its helper token are oaGitSSH's).
func oaMetadata(t *testing.T, c *oaChecker, dev string) {
	t.Helper()
	helper := protocol.WorkspaceAgentTokenPrefix + "openapi-gitssh"
	c.do(helper, "PUT", protocol.MetadataPath, map[string]any{"collected_at": "2026-11-27T09:00:00Z",
		"resources": map[string]any{"cpu": map[string]any{"used_cores": 0.5, "limit_cores": 2},
			"memory":  map[string]any{"used_bytes": 1900, "limit_bytes": 2000, "threshold": 90, "oom_kills": 1},
			"volumes": []map[string]any{{"path": "/home/dev", "used_bytes": 5, "total_bytes": 10, "threshold": 90}}},
		"items":    []map[string]any{{"key": "load", "display_name": "Load", "value": "0.5", "collected_at": "2026-11-27T09:00:00Z"}},
		"activity": map[string]any{"cpu_cores": 0.5, "top_process": "go", "matched": "go test ./...", "terminal_output": 10, "editor_connections": 1}}, 200, true)
	c.do(helper, "PUT", protocol.MetadataPath, map[string]any{"items": []map[string]any{{"key": ""}}}, 400, false)
	c.do(dev, "GET", "/api/v1/workspaces/tfssh", nil, 200, true)
}

// An agent's pod alerts (a container killed for lack of memory, the pod evicted) are recorded
// with the workspace, each once however often the agent reports it, and shown in its alerts;
// another agent's report of the same cluster name records nothing; a bad one is a 400 naming the
// field.
func TestPodAlertsWithTheWorkspace(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			agentToken := createAgent(t, env, "k1", nil)
			otherAgent := createAgent(t, env, "k2", nil)
			dev := createUser(t, env, "dev")
			var app sdk.Workspace
			mustCall(t, env, dev, "POST", "/api/v1/workspaces", map[string]any{"name": "app", "agent": "k1"}, http.StatusCreated, &app)
			at := env.Clock.Now().Add(-5 * time.Second)
			alerts := []protocol.PodAlert{{Kind: protocol.PodAlertOOMKilled, Subject: "dev", At: at, Message: "container dev was killed for lack of memory (exit code 137)"}}
			for rv := 1; rv <= 2; rv++ {
				reconcileCall(t, env, agentToken, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{
					{Name: app.KubeName, Namespace: app.Namespace, LatestK8sDeploymentInfo: deploymentIn("Running", rv), PodAlerts: alerts}}})
			}
			reconcileCall(t, env, otherAgent, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{
				{Name: app.KubeName, Namespace: app.Namespace, LatestK8sDeploymentInfo: deploymentIn("Running", 1),
					PodAlerts: []protocol.PodAlert{{Kind: protocol.PodAlertEvicted, Subject: "x", At: at}}}}})
			var ws sdk.Workspace
			mustCall(t, env, dev, "GET", "/api/v1/workspaces/app", nil, http.StatusOK, &ws)
			if len(ws.Alerts) != 1 || ws.Alerts[0].Kind != "oom-killed" || ws.Alerts[0].Subject != "dev" || !ws.Alerts[0].RaisedAt.Equal(at) ||
				ws.Alerts[0].Active || ws.Alerts[0].Detail != "container dev was killed for lack of memory (exit code 137)" {
				t.Fatalf("alerts %+v", ws.Alerts)
			}
			// An agent whose clock is ahead: its alert is dated now, not in the future.
			ahead := env.Clock.Now().Add(time.Hour)
			reconcileCall(t, env, agentToken, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{
				{Name: app.KubeName, Namespace: app.Namespace, LatestK8sDeploymentInfo: deploymentIn("Running", 3),
					PodAlerts: []protocol.PodAlert{{Kind: protocol.PodAlertEvicted, Subject: "app-pod", At: ahead}}}}})
			mustCall(t, env, dev, "GET", "/api/v1/workspaces/app", nil, http.StatusOK, &ws)
			if len(ws.Alerts) != 2 || ws.Alerts[0].Kind != "evicted" || !ws.Alerts[0].RaisedAt.Equal(env.Clock.Now()) {
				t.Fatalf("an alert from an agent ahead: %+v", ws.Alerts)
			}
			status, body := call(t, env, agentToken, "POST", protocol.ReconcilePath, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{
				{Name: app.KubeName, Namespace: app.Namespace, PodAlerts: []protocol.PodAlert{{Kind: "exploded", Subject: "dev", At: at}}}}})
			if status != http.StatusBadRequest || !strings.Contains(string(body), "workspace_agent_infos[0].pod_alerts[0].kind") {
				t.Errorf("a bad alert: %d %s", status, body)
			}
		})
	}
}

// Under a policy whose activity is work (the agent's lifecycle here), the helper is answered the
// processes that are work, and what it reports as work is recorded as the workspace's last work
// (at most every 30 s), with why; an idle interval records nothing, and the autostop counts from
// the last work, not from a connection. Under the default policy the work is recorded (shown) but
// no processes are asked for and the autostop does not count it.
func TestHelperWorkActivity(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine, withHelperTokens)
			agentToken := createAgent(t, env, "k1", map[string]any{"lifecycle": map[string]any{"default_ttl": "1m", "activity": "work",
				"activity_processes": []string{"make", "go test"}}})
			plainAgent := createAgent(t, env, "k2", nil)
			dev := createUser(t, env, "dev")
			var app, plain sdk.Workspace
			mustCall(t, env, dev, "POST", "/api/v1/workspaces", map[string]any{"name": "app", "agent": "k1"}, http.StatusCreated, &app)
			mustCall(t, env, dev, "POST", "/api/v1/workspaces", map[string]any{"name": "plain", "agent": "k2"}, http.StatusCreated, &plain)
			tokens := helperTokens(t, env, agentToken)
			for k, v := range helperTokens(t, env, plainAgent) {
				tokens[k] = v
			}
			report := func(token string, a protocol.Activity) protocol.MetadataAnswer {
				t.Helper()
				status, body := call(t, env, token, "PUT", protocol.MetadataPath, protocol.MetadataReport{Activity: &a})
				var answer protocol.MetadataAnswer
				if status != http.StatusOK || json.Unmarshal(body, &answer) != nil {
					t.Fatalf("report: %d %s", status, body)
				}
				return answer
			}
			detail := func(name string) sdk.Workspace {
				t.Helper()
				var ws sdk.Workspace
				mustCall(t, env, dev, "GET", "/api/v1/workspaces/"+name, nil, http.StatusOK, &ws)
				return ws
			}
			started := env.Clock.Now()
			env.Clock.Advance(10 * time.Second)
			if answer := report(tokens[app.KubeName], protocol.Activity{CPUCores: 0.01}); strings.Join(answer.ActivityProcesses, ",") != "make,go test" {
				t.Fatalf("the answer: %+v", answer)
			}
			if ws := detail("app"); ws.LastWorkAt != nil || ws.Automation == nil || ws.Automation.AutostopAt == nil || !ws.Automation.AutostopAt.Equal(started.Add(time.Minute)) {
				t.Fatalf("idle: work at %v, automation %+v", ws.LastWorkAt, ws.Automation)
			}
			env.Clock.Advance(10 * time.Second)
			worked := env.Clock.Now()
			report(tokens[app.KubeName], protocol.Activity{Matched: "go test ./... (pid 42)"})
			ws := detail("app")
			if ws.LastWorkAt == nil || !ws.LastWorkAt.Equal(worked) || ws.LastWorkReason != "process running: go test ./... (pid 42)" ||
				!ws.Automation.AutostopAt.Equal(worked.Add(time.Minute)) {
				t.Fatalf("after work: at %v %q, automation %+v", ws.LastWorkAt, ws.LastWorkReason, ws.Automation)
			}
			// Within 30 s, work is not written again; after, it is.
			env.Clock.Advance(10 * time.Second)
			report(tokens[app.KubeName], protocol.Activity{CPUCores: 1.5, TopProcess: "cc1"})
			if ws := detail("app"); !ws.LastWorkAt.Equal(worked) {
				t.Fatalf("written again after 10 s: %v", ws.LastWorkAt)
			}
			env.Clock.Advance(30 * time.Second)
			report(tokens[app.KubeName], protocol.Activity{CPUCores: 1.5, TopProcess: "cc1"})
			if ws := detail("app"); !ws.LastWorkAt.Equal(env.Clock.Now()) || ws.LastWorkReason != "CPU: 1.50 cores (most by cc1)" {
				t.Fatalf("after 40 s: %v %q", ws.LastWorkAt, ws.LastWorkReason)
			}
			// The default policy: no processes asked; the work is shown, not counted.
			if answer := report(tokens[plain.KubeName], protocol.Activity{CPUCores: 2}); len(answer.ActivityProcesses) != 0 {
				t.Fatalf("the default policy's answer: %+v", answer)
			}
			if ws := detail("plain"); ws.LastWorkAt == nil || !ws.LastWorkAt.Equal(env.Clock.Now()) || ws.LastWorkReason != "CPU: 2.00 cores" {
				t.Fatalf("work under the default policy: %v %q", ws.LastWorkAt, ws.LastWorkReason)
			}
		})
	}
}

// A helper's token is readable by the workspace's user: its reports cannot make the server write
// on every request. A report sooner than 5 s after the last is a 429 with Retry-After; a
// condition flapping over and under its threshold is raised again only a minute after it cleared;
// kill counts that go up and down (another helper start each time) record one event a minute.
func TestHelperReportsBounded(t *testing.T) {
	env := servertest.NewWith(t, servertest.Engines[0], withHelperTokens)
	agentToken := createAgent(t, env, "k1", nil)
	dev := createUser(t, env, "dev")
	var app sdk.Workspace
	mustCall(t, env, dev, "POST", "/api/v1/workspaces", map[string]any{"name": "app", "agent": "k1"}, http.StatusCreated, &app)
	reconcileCall(t, env, agentToken, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{
		{Name: app.KubeName, Namespace: app.Namespace, LatestK8sDeploymentInfo: deploymentIn("Running", 1)}}})
	token := helperTokens(t, env, agentToken)[app.KubeName]
	const gib = int64(1) << 30
	tooSoon := 0
	for i := range 60 {
		used := int64(1)
		if i%2 == 0 {
			used = 10 * gib
		}
		rep := protocol.MetadataReport{HelperStarted: env.Clock.Now().Add(time.Duration(i) * time.Second), Resources: protocol.Resources{
			Memory:  &protocol.MemoryUsage{UsedBytes: 1, LimitBytes: 2 * gib, Threshold: 90, OOMKills: int64(1 - i%2)},
			Volumes: []protocol.VolumeUsage{{Path: "/projects", UsedBytes: used, TotalBytes: 10 * gib, Threshold: 90}}}}
		req := httptest.NewRequest("PUT", protocol.MetadataPath, bytes.NewReader(mustJSON(t, rep)))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		env.Server.Handler().ServeHTTP(rec, req)
		switch {
		case rec.Code == http.StatusTooManyRequests && rec.Header().Get("Retry-After") != "":
			tooSoon++
		case rec.Code != http.StatusOK:
			t.Fatalf("report %d: %d %s", i, rec.Code, rec.Body)
		}
		if i%3 == 2 {
			env.Clock.Advance(5 * time.Second) // three reports every 5 s: two too soon
		}
	}
	var ws sdk.Workspace
	mustCall(t, env, dev, "GET", "/api/v1/workspaces/app", nil, http.StatusOK, &ws)
	// 100 s of reports: 20 taken; the volume raised at most twice, the kills recorded twice.
	var volumes, kills int
	for _, a := range ws.Alerts {
		switch a.Kind {
		case "volume":
			volumes++
		case "oom-killed":
			kills++
		}
	}
	if tooSoon != 40 || volumes > 2 || kills > 2 {
		t.Fatalf("%d reports refused (want 40), %d volume alerts and %d kill events (want at most 2 each): %+v", tooSoon, volumes, kills, ws.Alerts)
	}
}
