package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// The reconcile benchmarks serve real requests through the server's handler (JSON decoding, auth,
// the decision, the store's transaction, config generation, encoding) on both stores, without the
// network. BenchmarkBatchUpdate is their baseline: the store's batched UPDATE of the same rows.
// docs/benchmarks.md records the figures.

type benchEnv struct {
	env        *servertest.Env
	agentToken string
	agent      workspace.Agent
	owner      workspace.User
	rows       []workspace.Workspace
}

// seed creates an agent with n workspaces, all answered and reported Running at resource version 1.
func seedBench(b *testing.B, engine string, n int) *benchEnv {
	b.Helper()
	env := servertest.NewWith(b, engine)
	ctx := context.Background()
	token := createAgent(b, env, "bench", nil)
	createUser(b, env, "dev")
	agent, err := env.Store.AgentByName(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	owner, err := env.Store.UserByUsername(ctx, "dev")
	if err != nil {
		b.Fatal(err)
	}
	devfileText := ""
	be := &benchEnv{env: env, agentToken: token, agent: agent, owner: owner}
	now := env.Clock.Now()
	rv := "1"
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("ws-%05d", i)
		if devfileText == "" {
			var created struct{}
			mustCall(b, env, env.AdminToken, "POST", "/api/v1/workspaces", map[string]any{"name": name, "agent": "bench"}, http.StatusCreated, &created)
			w := stored(b, env, name)
			devfileText = w.Devfile
			be.rows = append(be.rows, w)
			continue
		}
		w := workspace.Workspace{ID: uuid.NewString(), Name: name, OwnerID: owner.ID, OwnerName: owner.Username, AgentID: agent.ID, AgentName: agent.Name,
			Namespace: "hangar-" + name, Devfile: devfileText, DesiredState: workspace.Running, ActualState: workspace.CreationRequested,
			DesiredStateUpdatedAt: now, CreatedAt: now}
		if err := env.Store.CreateWorkspace(ctx, w, -1, -1); err != nil {
			b.Fatal(err)
		}
		be.rows = append(be.rows, w)
	}
	env.Clock.Advance(time.Minute)
	answered := env.Clock.Now()
	for i := range be.rows {
		be.rows[i].ActualState = workspace.Running
		be.rows[i].RespondedToAgentAt = &answered
		be.rows[i].DeploymentResourceVersion = &rv
	}
	if err := env.Store.UpdateWorkspacesBatch(ctx, be.rows); err != nil {
		b.Fatal(err)
	}
	env.Clock.Advance(time.Minute)
	return be
}

func (be *benchEnv) body(b *testing.B, updateType protocol.UpdateType, infos []protocol.WorkspaceAgentInfo) []byte {
	j, err := json.Marshal(protocol.ReconcileRequest{UpdateType: updateType, WorkspaceAgentInfos: infos})
	if err != nil {
		b.Fatal(err)
	}
	return j
}

func (be *benchEnv) serve(b *testing.B, body []byte) protocol.ReconcileResponse {
	req := httptest.NewRequest("POST", protocol.ReconcilePath, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+be.agentToken)
	rec := httptest.NewRecorder()
	be.env.Server.Handler().ServeHTTP(rec, req)
	if rec.Code != 200 {
		b.Fatalf("reconcile: %d %s", rec.Code, rec.Body.String())
	}
	var resp protocol.ReconcileResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		b.Fatal(err)
	}
	return resp
}

func runningInfos(rows []workspace.Workspace) []protocol.WorkspaceAgentInfo {
	infos := make([]protocol.WorkspaceAgentInfo, len(rows))
	for i, w := range rows {
		infos[i] = protocol.WorkspaceAgentInfo{Name: w.KubeName, Namespace: w.Namespace, LatestK8sDeploymentInfo: deploymentIn("Running", 1)}
	}
	return infos
}

// BenchmarkPartialNothingChanged: an agent with 1,000 workspaces reports nothing and nothing changed.
func BenchmarkPartialNothingChanged(b *testing.B) {
	for _, engine := range servertest.Engines {
		b.Run(engine, func(b *testing.B) {
			be := seedBench(b, engine, 1000)
			body := be.body(b, protocol.UpdatePartial, []protocol.WorkspaceAgentInfo{})
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if resp := be.serve(b, body); len(resp.WorkspaceRailsInfos) != 0 {
					b.Fatalf("answered %d workspaces", len(resp.WorkspaceRailsInfos))
				}
			}
		})
	}
}

// BenchmarkPartial100Changed: of 1,000 workspaces, 100 had their desired state changed by users
// (Running ↔ Stopped) and the agent reports 100 Deployments that changed; the answer carries 100
// configs.
func BenchmarkPartial100Changed(b *testing.B) {
	for _, engine := range servertest.Engines {
		b.Run(engine, func(b *testing.B) {
			be := seedBench(b, engine, 1000)
			ctx := context.Background()
			changed := be.rows[:100]
			reported := runningInfos(be.rows[500:600])
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				be.env.Clock.Advance(time.Second)
				to := workspace.Stopped
				if i%2 == 1 {
					to = workspace.Running
				}
				for _, w := range changed {
					if _, err := be.env.Store.UpdateWorkspace(ctx, store.WorkspaceRef{ID: w.ID}, func(cur workspace.Workspace) (workspace.Workspace, error) {
						cur.DesiredState, cur.DesiredStateUpdatedAt = to, be.env.Clock.Now()
						return cur, nil
					}); err != nil {
						b.Fatal(err)
					}
				}
				rv := fmt.Sprint(i + 2)
				for j := range reported {
					reported[j].LatestK8sDeploymentInfo.Metadata.ResourceVersion = rv
				}
				body := be.body(b, protocol.UpdatePartial, reported)
				be.env.Clock.Advance(time.Second)
				b.StartTimer()
				resp := be.serve(b, body)
				if len(resp.WorkspaceRailsInfos) != 200 {
					b.Fatalf("answered %d workspaces, want 200", len(resp.WorkspaceRailsInfos))
				}
			}
		})
	}
}

const fullN = 10000

// BenchmarkFullReconcile: an agent reports all 10,000 of its workspaces (steady state: each
// Deployment matches its desired state). Reported as rows/s to compare with BenchmarkBatchUpdate.
func BenchmarkFullReconcile(b *testing.B) {
	for _, engine := range servertest.Engines {
		b.Run(engine, func(b *testing.B) {
			be := seedBench(b, engine, fullN)
			body := be.body(b, protocol.UpdateFull, runningInfos(be.rows))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				be.env.Clock.Advance(time.Second)
				if resp := be.serve(b, body); len(resp.WorkspaceRailsInfos) != fullN {
					b.Fatalf("answered %d", len(resp.WorkspaceRailsInfos))
				}
			}
			b.ReportMetric(float64(fullN*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkBatchUpdate is the baseline: the store's batched UPDATE of the same 10,000 rows, with
// nothing else.
func BenchmarkBatchUpdate(b *testing.B) {
	for _, engine := range servertest.Engines {
		b.Run(engine, func(b *testing.B) {
			be := seedBench(b, engine, fullN)
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				at := be.env.Clock.Now().Add(time.Duration(i) * time.Second)
				for j := range be.rows {
					be.rows[j].RespondedToAgentAt = &at
				}
				if err := be.env.Store.UpdateWorkspacesBatch(ctx, be.rows); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(fullN*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
