package server_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// FuzzDecoders sends arbitrary bodies to every endpoint that decodes outside input and checks the
// server never fails with a 5xx and always answers a JSON object.
func FuzzDecoders(f *testing.F) {
	f.Add(uint8(0), []byte(`{"update_type":"partial","workspace_agent_infos":[{"name":"w","namespace":"hangar-w","latest_k8s_deployment_info":{"metadata":{"resourceVersion":"1"},"spec":{"replicas":1},"status":{"conditions":[{"type":"Progressing","reason":"NewReplicaSetAvailable"}]}}}]}`))
	f.Add(uint8(0), []byte(`{"update_type":"full","workspace_agent_infos":[{"name":"w","namespace":"hangar-w","termination_progress":"Terminated","error_details":{"error_type":"applier","error_message":"x"}}]}`))
	f.Add(uint8(1), []byte(`{"name":"w2","agent":"k1","devfile":"schemaVersion: 2.2.0\ncomponents:\n- name: main\n  container:\n    image: alpine\n"}`))
	f.Add(uint8(2), []byte(`{"desired_state":"Stopped"}`))
	f.Add(uint8(3), []byte(`{"name":"k9","config":{"dns_zone":"a.b","workspaces_quota":3}}`))
	f.Add(uint8(4), []byte(`{"username":"x"}`))
	f.Add(uint8(0), []byte(`{"update_type":"partial","workspace_agent_infos":null}`))
	f.Add(uint8(1), []byte(`[1,2,3]`))

	env := servertest.New(f)
	agentToken := createAgent(f, env, "k1", nil)
	mustCall(f, env, env.AdminToken, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "agent": "k1"}, http.StatusCreated, nil)
	endpoints := []struct{ token, method, path string }{
		{agentToken, "POST", protocol.ReconcilePath},
		{env.AdminToken, "POST", "/api/v1/workspaces"},
		{env.AdminToken, "PATCH", "/api/v1/workspaces/w"},
		{env.AdminToken, "POST", "/api/v1/agents"},
		{env.AdminToken, "POST", "/api/v1/users"},
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		e := endpoints[int(which)%len(endpoints)]
		status, out := call(t, env, e.token, e.method, e.path, body)
		if status >= 500 {
			t.Fatalf("%s %s answered %d to %q: %s", e.method, e.path, status, body, out)
		}
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("%s %s answered non-object %q to %q", e.method, e.path, out, body)
		}
	})
}
