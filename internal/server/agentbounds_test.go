package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestAgentReportBounds: what an agent reports is bounded before it is stored (issue 12 item 4:
// 8 MiB of resourceVersion and of condition message were accepted, and one GET returned 16.8 MB).
// An identifier over its bound is refused, naming the field, and nothing is written; a message over
// its bound is cut, so that the workspace still shows why it failed, and the GET stays small.
func TestAgentReportBounds(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			agent := createAgent(t, env, "k1", nil)
			user := createUser(t, env, "dev")
			mustCall(t, env, user, "POST", "/api/v1/workspaces", map[string]any{"name": "mine", "agent": "k1"}, http.StatusCreated, nil)
			before := snapshot(t, env, user)
			huge := strings.Repeat("x", 8<<20)

			refused := []struct {
				name, field string
				edit        func(*protocol.WorkspaceAgentInfo)
			}{
				{"8 MiB resourceVersion", "workspace_agent_infos[0].latest_k8s_deployment_info.metadata.resourceVersion",
					func(i *protocol.WorkspaceAgentInfo) { i.LatestK8sDeploymentInfo.Metadata.ResourceVersion = huge }},
				{"resourceVersion of 129 bytes", "workspace_agent_infos[0].latest_k8s_deployment_info.metadata.resourceVersion",
					func(i *protocol.WorkspaceAgentInfo) {
						i.LatestK8sDeploymentInfo.Metadata.ResourceVersion = strings.Repeat("7", protocol.MaxResourceVersionBytes+1)
					}},
				{"resourceVersion with a space", "workspace_agent_infos[0].latest_k8s_deployment_info.metadata.resourceVersion",
					func(i *protocol.WorkspaceAgentInfo) { i.LatestK8sDeploymentInfo.Metadata.ResourceVersion = "12 34" }},
				{"8 MiB condition reason", "workspace_agent_infos[0].latest_k8s_deployment_info.status.conditions[1].reason",
					func(i *protocol.WorkspaceAgentInfo) { i.LatestK8sDeploymentInfo.Status.Conditions[1].Reason = huge }},
				{"8 MiB condition type", "workspace_agent_infos[0].latest_k8s_deployment_info.status.conditions[0].type",
					func(i *protocol.WorkspaceAgentInfo) { i.LatestK8sDeploymentInfo.Status.Conditions[0].Type = huge }},
				{"too many conditions", "workspace_agent_infos[0].latest_k8s_deployment_info.status.conditions",
					func(i *protocol.WorkspaceAgentInfo) {
						c := i.LatestK8sDeploymentInfo.Status.Conditions
						for len(c) <= protocol.MaxConditions {
							c = append(c, protocol.DeploymentCondition{Type: "Extra", Status: "True"})
						}
						i.LatestK8sDeploymentInfo.Status.Conditions = c
					}},
				{"8 MiB pod failure reason", "workspace_agent_infos[0].pod_failure.reason",
					func(i *protocol.WorkspaceAgentInfo) { i.PodFailure = &protocol.PodFailure{Reason: huge} }},
			}
			for _, tc := range refused {
				t.Run(tc.name, func(t *testing.T) {
					info := infoOf(t, env, "mine")
					info.LatestK8sDeploymentInfo = deploymentIn("Running", 5)
					tc.edit(&info)
					status, body := call(t, env, agent, "POST", protocol.ReconcilePath, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{info}})
					if status != http.StatusBadRequest {
						t.Fatalf("status %d, want 400: %.300s", status, body)
					}
					if len(body) > 4<<10 {
						t.Errorf("the refusal is %d bytes: it echoes the value", len(body))
					}
					e := apiError(t, body)
					found := false
					for _, v := range e.Validations {
						found = found || v.Field == tc.field && v.Detail != ""
					}
					if !found {
						t.Errorf("no validation naming %s: %s", tc.field, body)
					}
					if after := snapshot(t, env, user); after != before {
						t.Errorf("something was written:\nbefore %s\nafter  %s", before, after)
					}
				})
			}

			// A resourceVersion at the bound, opaque, is kept and echoed.
			rv := strings.Repeat("a", protocol.MaxResourceVersionBytes-3) + "/=9"
			info := infoOf(t, env, "mine")
			info.LatestK8sDeploymentInfo = deploymentIn("Running", 1)
			info.LatestK8sDeploymentInfo.Metadata.ResourceVersion = rv
			resp := reconcileCall(t, env, agent, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{info}})
			if len(resp.WorkspaceRailsInfos) != 1 || resp.WorkspaceRailsInfos[0].DeploymentResourceVersion != rv {
				t.Fatalf("the resourceVersion at the bound is not echoed: %+v", resp.WorkspaceRailsInfos)
			}

			// 8 MiB of condition message (the deadline's, which the user is shown) and 8 MiB of
			// every other message: accepted, cut, and the workspace says why it failed.
			info.LatestK8sDeploymentInfo = deploymentIn("Failed", 2)
			for i := range info.LatestK8sDeploymentInfo.Status.Conditions {
				info.LatestK8sDeploymentInfo.Status.Conditions[i].Message = "é" + huge
			}
			reconcileCall(t, env, agent, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{info}})
			status, body := call(t, env, user, "GET", "/api/v1/workspaces/mine", nil)
			if status != http.StatusOK {
				t.Fatalf("GET: %d %s", status, body)
			}
			if len(body) > 16<<10 {
				t.Fatalf("GET answered %d bytes after 8 MiB messages", len(body))
			}
			var ws sdk.Workspace
			if err := json.Unmarshal(body, &ws); err != nil {
				t.Fatal(err)
			}
			if ws.ActualState != "Failed" || ws.Error == nil || !strings.HasPrefix(ws.Error.Message, "ProgressDeadlineExceeded: éxxx") ||
				!strings.HasSuffix(ws.Error.Message, protocol.TruncatedSuffix) || !utf8.ValidString(ws.Error.Message) {
				t.Fatalf("the failure after an 8 MiB message: %s %.200v", ws.ActualState, ws.Error)
			}

			// A pod failure's and an apply error's messages are cut the same way.
			info.LatestK8sDeploymentInfo = deploymentIn("Starting", 3)
			info.PodFailure = &protocol.PodFailure{Reason: "CrashLoopBackOff", Message: huge}
			reconcileCall(t, env, agent, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{info}})
			ws = getWorkspace(t, env, user, "mine")
			if ws.Error == nil || len(ws.Error.Message) > len("CrashLoopBackOff: ")+protocol.MaxMessageBytes || !strings.HasSuffix(ws.Error.Message, protocol.TruncatedSuffix) {
				t.Fatalf("the pod failure after an 8 MiB message: %.200v", ws.Error)
			}
		})
	}
}

// TestAgentConfigNegativeQuantities: a negative CPU or memory quantity in an agent's resources is
// refused on create and on PATCH, naming the field, and nothing is written.
func TestAgentConfigNegativeQuantities(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			createAgent(t, env, "k1", map[string]any{"max_resources_per_workspace": map[string]any{"limits": map[string]string{"cpu": "4"}}})
			agents := func() string {
				_, b := call(t, env, env.AdminToken, "GET", "/api/v1/agents", nil)
				return string(b)
			}
			before := agents()
			for _, tc := range []struct {
				section, kind, resource, value string
			}{
				{"default_resources_per_workspace_container", "requests", "cpu", "-100m"},
				{"default_resources_per_workspace_container", "limits", "memory", "-1Gi"},
				{"max_resources_per_workspace", "limits", "cpu", "-4"},
				{"max_resources_per_workspace", "requests", "memory", "-1e3"},
			} {
				cfg := map[string]any{tc.section: map[string]any{tc.kind: map[string]string{tc.resource: tc.value}}}
				field := "config." + tc.section + "." + tc.kind + "." + tc.resource
				for _, req := range []struct{ method, path string }{{"POST", "/api/v1/agents"}, {"PATCH", "/api/v1/agents/k1"}} {
					body := map[string]any{"config": cfg}
					if req.method == "POST" {
						body["name"] = "k2"
					}
					status, out := call(t, env, env.AdminToken, req.method, req.path, body)
					if status != http.StatusBadRequest {
						t.Fatalf("%s %s with %s %s: %d %s", req.method, req.path, field, tc.value, status, out)
					}
					e := apiError(t, out)
					found := false
					for _, v := range e.Validations {
						found = found || v.Field == field && strings.Contains(v.Detail, "negative")
					}
					if !found {
						t.Errorf("%s %s: no validation naming %s as negative: %s", req.method, req.path, field, out)
					}
				}
			}
			if after := agents(); after != before {
				t.Errorf("a refused config was written:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}
