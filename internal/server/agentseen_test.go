package server_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestAgentLastSeen: GET /api/v1/agents says when each agent last called and whether it is
// connected (called within two minutes), on both stores.
func TestAgentLastSeen(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			token := createAgent(t, env, "k1", nil)
			createAgent(t, env, "quiet", nil)
			list := func() map[string]sdk.Agent {
				t.Helper()
				var as []sdk.Agent
				mustCall(t, env, env.AdminToken, "GET", "/api/v1/agents", nil, http.StatusOK, &as)
				out := map[string]sdk.Agent{}
				for _, a := range as {
					out[a.Name] = a
				}
				return out
			}
			if a := list()["k1"]; a.Connected == nil || *a.Connected || a.LastSeenAt != nil {
				t.Fatalf("before any call: %+v", a)
			}
			reconcileCall(t, env, token, protocol.ReconcileRequest{UpdateType: protocol.UpdateFull, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
			as := list()
			if a := as["k1"]; a.Connected == nil || !*a.Connected || a.LastSeenAt == nil || !a.LastSeenAt.Equal(servertest.Start) {
				t.Fatalf("after a reconcile: %+v", a)
			}
			if a := as["quiet"]; a.Connected == nil || *a.Connected {
				t.Fatalf("an agent that never called: %+v", a)
			}
			env.Clock.Advance(3 * time.Minute)
			if a := list()["k1"]; *a.Connected || !a.LastSeenAt.Equal(servertest.Start) {
				t.Fatalf("three minutes later: %+v", a)
			}
			reconcileCall(t, env, token, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
			if a := list()["k1"]; !*a.Connected || !a.LastSeenAt.Equal(servertest.Start.Add(3*time.Minute)) {
				t.Fatalf("after another reconcile: %+v", a)
			}
		})
	}
}
