package server_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestAgentPatchWholeConfig: the web UI's agents page sends back the whole config the list gave,
// edited: a config sent back unchanged is accepted (the fixed fields are equal), and one field
// changed in it is the only change.
func TestAgentPatchWholeConfig(t *testing.T) {
	env := servertest.New(t)
	createAgent(t, env, "k1", map[string]any{"dns_zone": "ws.example.com", "namespace_mode": "shared", "shared_namespace": "dev"})
	var agents []sdk.Agent
	mustCall(t, env, env.AdminToken, "GET", "/api/v1/agents", nil, http.StatusOK, &agents)
	var cfg map[string]any
	if err := json.Unmarshal(agents[0].Config, &cfg); err != nil {
		t.Fatal(err)
	}
	mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/agents/k1", map[string]any{"config": cfg}, http.StatusOK, nil)
	cfg["workspaces_quota"] = 7
	var a sdk.Agent
	mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/agents/k1", map[string]any{"config": cfg}, http.StatusOK, &a)
	var got map[string]any
	if err := json.Unmarshal(a.Config, &got); err != nil {
		t.Fatal(err)
	}
	if got["workspaces_quota"] != float64(7) || got["dns_zone"] != "ws.example.com" {
		t.Fatalf("config after the PATCH: %v", got)
	}
}
