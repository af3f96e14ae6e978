package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/store/postgres"
	"github.com/hangar-dev/hangar/internal/testutil/pgtest"
)

// TestReplicasShareOnePostgres runs two servers, each with its own connection pool, on one Postgres
// database: they bootstrap one admin between them, and a change made through one is what the agent
// gets through the other.
func TestReplicasShareOnePostgres(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	clk := clock.NewFake(servertest.Start)
	var envs [2]*servertest.Env
	for i := range envs {
		st, err := postgres.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		srv := server.New(server.Options{Store: st, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		hs := httptest.NewServer(srv.Handler())
		t.Cleanup(hs.Close)
		envs[i] = &servertest.Env{URL: hs.URL, Clock: clk, Store: st, Server: srv, DataDir: t.TempDir()}
	}
	// Both replicas bootstrap at once: exactly one admin, exactly one token file.
	var wg sync.WaitGroup
	created := make([]bool, 2)
	for i, env := range envs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, c, err := env.Server.Bootstrap(ctx, env.DataDir)
			if err != nil {
				t.Error(err)
			}
			created[i] = c
		}()
	}
	wg.Wait()
	if created[0] == created[1] {
		t.Fatalf("bootstrap created admin on both or neither replica: %v", created)
	}
	winner := envs[0]
	if created[1] {
		winner = envs[1]
	}
	token, err := os.ReadFile(winner.DataDir + "/admin-token")
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range envs {
		env.AdminToken = strings.TrimSpace(string(token))
	}
	a, b := envs[0], envs[1]
	agent := createAgent(t, a, "k1", nil)
	user := createUser(t, b, "dev")
	mustCall(t, a, user, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "agent": "k1"}, 201, nil)
	clk.Advance(60e9)
	resp := reconcileCall(t, b, agent, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
	if len(resp.WorkspaceRailsInfos) != 1 || resp.WorkspaceRailsInfos[0].ConfigToApply == "" {
		t.Fatalf("replica b's answer for a workspace created on a: %+v", resp.WorkspaceRailsInfos)
	}
	clk.Advance(60e9)
	mustCall(t, b, user, "PATCH", "/api/v1/workspaces/w", map[string]string{"desired_state": "Stopped"}, 200, nil)
	clk.Advance(60e9)
	resp = reconcileCall(t, a, agent, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
	if len(resp.WorkspaceRailsInfos) != 1 || resp.WorkspaceRailsInfos[0].DesiredState != "Stopped" || !strings.Contains(resp.WorkspaceRailsInfos[0].ConfigToApply, "replicas: 0") {
		t.Fatalf("replica a's answer after a stop on b: %+v", resp.WorkspaceRailsInfos)
	}
	var ws sdk.Workspace
	mustCall(t, b, user, "GET", "/api/v1/workspaces/w", nil, 200, &ws)
	if ws.RespondedToAgentAt == nil || !ws.RespondedToAgentAt.Equal(clk.Now()) {
		t.Fatalf("replica b does not see a's response: %+v", ws)
	}
}
