package server_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// A Kubernetes workspace's generated config gives its helper a token (in the <name>-ssh Secret)
// and the server's URL; the server admits that token for that workspace only while it exists, and
// never as a connection out (its SSH goes through the access proxy).
func TestKubeHelperTokens(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			key := []byte("a key of 32 bytes for the tests.")
			env := servertest.NewWith(t, engine, func(o *server.Options) {
				o.HelperTokenKeys = [][]byte{key}
				o.HelperURL = func() string { return "http://10.99.0.2:8443" }
			})
			agentToken := createAgent(t, env, "k1", nil)
			user := createUser(t, env, "dev")
			for _, n := range []string{"a", "b"} {
				mustCall(t, env, user, "POST", "/api/v1/workspaces", map[string]any{"name": n, "agent": "k1"}, http.StatusCreated, nil)
			}
			resp := reconcileCall(t, env, agentToken, protocol.ReconcileRequest{UpdateType: protocol.UpdateFull, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
			tokens := map[string]string{}
			tokenLine := regexp.MustCompile(`(?m)^  helper-token: (\S+)$`)
			for _, w := range resp.WorkspaceRailsInfos {
				m := tokenLine.FindStringSubmatch(w.ConfigToApply)
				if m == nil {
					t.Fatalf("%s: the config has no helper token:\n%s", w.Name, w.ConfigToApply)
				}
				if !strings.Contains(w.ConfigToApply, "value: http://10.99.0.2:8443") {
					t.Fatalf("%s: the config does not give the helper the server's URL", w.Name)
				}
				tokens[strings.SplitN(w.Name, "-", 2)[0]] = m[1] // by the workspace's name, not its cluster name
			}
			if len(tokens) != 2 || tokens["a"] == tokens["b"] {
				t.Fatalf("tokens %v: want one per workspace, each its own", tokens)
			}
			connect := func(token string) (int, string) {
				status, body := call(t, env, token, "GET", protocol.WorkspaceAgentConnectPath, nil)
				return status, string(body)
			}
			// The server knows the token (it gets past authentication) but a Kubernetes helper
			// does not connect out.
			if status, body := connect(tokens["a"]); status != http.StatusForbidden || !strings.Contains(body, "does not connect out") {
				t.Fatalf("a's token on the connect endpoint: %d %s", status, body)
			}
			forged := tokens["a"][:strings.LastIndexByte(tokens["a"], '.')] + tokens["b"][strings.LastIndexByte(tokens["b"], '.'):]
			if status, body := connect(forged); status != http.StatusUnauthorized || !strings.Contains(body, "not made by this server's key") {
				t.Fatalf("a's ID with b's MAC: %d %s", status, body)
			}
			mustCall(t, env, user, "PATCH", "/api/v1/workspaces/a", map[string]string{"desired_state": "Terminated"}, http.StatusOK, nil)
			if status, body := connect(tokens["a"]); status != http.StatusUnauthorized || !strings.Contains(body, "deleted") {
				t.Fatalf("a deleted workspace's token: %d %s", status, body)
			}
		})
	}
}

// Without a key, no config carries a token, and a token that looks like one is refused.
func TestKubeHelperTokensOff(t *testing.T) {
	env := servertest.New(t)
	agentToken := createAgent(t, env, "k1", nil)
	user := createUser(t, env, "dev")
	mustCall(t, env, user, "POST", "/api/v1/workspaces", map[string]any{"name": "a", "agent": "k1"}, http.StatusCreated, nil)
	resp := reconcileCall(t, env, agentToken, protocol.ReconcileRequest{UpdateType: protocol.UpdateFull, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
	if len(resp.WorkspaceRailsInfos) != 1 || strings.Contains(resp.WorkspaceRailsInfos[0].ConfigToApply, "helper-token") || strings.Contains(resp.WorkspaceRailsInfos[0].ConfigToApply, "HANGAR_HELPER_SERVER_URL") {
		t.Fatalf("a config without a key: %+v", resp.WorkspaceRailsInfos)
	}
	status, body := call(t, env, "hwa_k1_x.AAAA", "GET", protocol.WorkspaceAgentConnectPath, nil)
	if status != http.StatusUnauthorized || !strings.Contains(string(body), "no key is configured") {
		t.Fatalf("%d %s", status, body)
	}
}

// A Terraform helper's random token may begin as a Kubernetes one does; its hash still admits it,
// with or without the Kubernetes tokens' key.
func TestTerraformTokenThatLooksKubernetes(t *testing.T) {
	for _, keys := range [][][]byte{nil, {[]byte("a key of 32 bytes for the tests.")}} {
		ae := newAgentEnv(t, "sqlite", func(o *server.Options) { o.HelperTokenKeys = keys; o.HelperURL = func() string { return "http://x" } })
		var ws sdk.Workspace
		mustCall(t, ae.Env, ae.dev, "GET", "/api/v1/workspaces/tfw", nil, http.StatusOK, &ws)
		token := workspace.KubeHelperTokenPrefix + "rest-of-a-random-terraform-token"
		if err := ae.Store.CreateWorkspaceAgentToken(context.Background(), store.WorkspaceAgentToken{Hash: tfbackend.HashAgentToken(token), WorkspaceID: ws.ID, BuildNumber: 1, CreatedAt: ae.Clock.Now()}); err != nil {
			t.Fatal(err)
		}
		// Admitted (a plain GET is then a 400: not a WebSocket), not refused as a bad Kubernetes token.
		if status, body := call(t, ae.Env, token, "GET", protocol.WorkspaceAgentConnectPath, nil); status != http.StatusBadRequest {
			t.Fatalf("keys %d: %d %s", len(keys), status, body)
		}
	}
}
