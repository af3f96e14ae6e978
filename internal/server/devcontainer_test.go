package server_test

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestCreateWorkspaceFromDevcontainer: POST /api/v1/workspaces with a devcontainer.json (JSONC)
// creates a workspace whose answer, and whose read, say it was defined by one, with its endpoints
// and the translation's warnings; what cannot be honoured is refused with a 400 naming each field,
// as is a request that gives a devfile too, and nothing is written then.
func TestCreateWorkspaceFromDevcontainer(t *testing.T) {
	const dc = `// .devcontainer/devcontainer.json
{
	"image": "mcr.microsoft.com/devcontainers/base:ubuntu",
	"forwardPorts": [3000, 8080], // the app and its API
	"portsAttributes": {"3000": {"label": "app"}},
	"containerEnv": {"MODE": "dev"},
	"postCreateCommand": "echo created",
	"customizations": {"vscode": {"extensions": ["golang.go"]}},
}`
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			createAgent(t, env, "eu", map[string]any{"max_resources_per_workspace": map[string]any{"limits": map[string]any{"cpu": "4", "memory": "8Gi"}}})
			user := createUser(t, env, "dev")
			var w sdk.Workspace
			mustCall(t, env, user, "POST", "/api/v1/workspaces", map[string]any{"name": "dc", "agent": "eu", "devcontainer": dc}, http.StatusCreated, &w)
			if w.Definition != "devcontainer.json" {
				t.Errorf("definition %q, want devcontainer.json", w.Definition)
			}
			if !slices.ContainsFunc(w.Warnings, func(s string) bool {
				return strings.HasPrefix(s, "customizations.vscode.extensions (golang.go) are not installed")
			}) {
				t.Errorf("warnings %q, want the extension's", w.Warnings)
			}
			var got sdk.Workspace
			mustCall(t, env, user, "GET", "/api/v1/workspaces/dc", nil, http.StatusOK, &got)
			if got.Definition != "devcontainer.json" {
				t.Errorf("GET: definition %q", got.Definition)
			}
			var eps []string
			for _, e := range got.Endpoints {
				eps = append(eps, fmt.Sprintf("%s:%d:%s", e.Name, e.Port, e.Exposure))
			}
			if want := []string{"app:3000:public", "port-8080:8080:public", "hangar-editor:60001:public"}; !slices.Equal(eps, want) {
				t.Errorf("endpoints %q, want %q", eps, want)
			}

			// A devfile workspace says so too.
			mustCall(t, env, user, "POST", "/api/v1/workspaces", map[string]any{"name": "df", "agent": "eu"}, http.StatusCreated, &w)
			if w.Definition != "devfile" {
				t.Errorf("a devfile workspace: definition %q", w.Definition)
			}

			_, before := call(t, env, user, "GET", "/api/v1/workspaces", nil)
			for _, tc := range []struct {
				name   string
				body   map[string]any
				fields []string
			}{
				{"with a devfile", map[string]any{"devcontainer": dc, "devfile": "schemaVersion: 2.2.0"}, []string{"devcontainer"}},
				{"unsafe", map[string]any{"devcontainer": `{"image":"i","privileged":true,"runArgs":["--network=host"],"remoteUser":"root","mounts":["type=bind,source=/,target=/host"],"features":{"ghcr.io/devcontainers/features/docker-in-docker:2":{}}}`},
					[]string{"devcontainer.privileged", `devcontainer.features["ghcr.io/devcontainers/features/docker-in-docker:2"]`, "devcontainer.runArgs[0]", "devcontainer.remoteUser", "devcontainer.mounts[0]"}},
				{"over the agent's caps", map[string]any{"devcontainer": `{"image":"i","hostRequirements":{"cpus":8}}`}, []string{"devcontainer.hostRequirements.cpus"}},
				{"not JSON", map[string]any{"devcontainer": `{"image": }`}, []string{"devcontainer"}},
				{"too large", map[string]any{"devcontainer": `{"image":"i"}` + strings.Repeat(" ", sdk.MaxDevfileBytes)}, []string{"devcontainer"}},
			} {
				tc.body["name"], tc.body["agent"] = "bad", "eu"
				status, out := call(t, env, user, "POST", "/api/v1/workspaces", tc.body)
				if status != http.StatusBadRequest {
					t.Fatalf("%s: %d %s", tc.name, status, out)
				}
				var fields []string
				for _, v := range apiError(t, out).Validations {
					fields = append(fields, v.Field)
				}
				slices.Sort(fields)
				slices.Sort(tc.fields)
				if !slices.Equal(slices.Compact(fields), tc.fields) {
					t.Errorf("%s: fields %q, want %q: %s", tc.name, fields, tc.fields, out)
				}
			}
			if _, after := call(t, env, user, "GET", "/api/v1/workspaces", nil); string(after) != string(before) {
				t.Errorf("a refused create wrote something:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// TestCreateWorkspaceWithFeatures: a devcontainer.json with features on an agent that builds no
// images is refused with a 400 naming devcontainer.features and giving the build's hash, and nothing
// is written; on an agent with a registry, or one whose admin mapped that hash to a prebuilt image,
// it is created, and its warnings give the hash.
func TestCreateWorkspaceWithFeatures(t *testing.T) {
	const dc = `{"image": "mcr.microsoft.com/devcontainers/base:ubuntu", "features": {"ghcr.io/devcontainers/features/node:1": "20"}}`
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			createAgent(t, env, "plain", nil)
			user := createUser(t, env, "dev")
			_, before := call(t, env, user, "GET", "/api/v1/workspaces", nil)
			status, out := call(t, env, user, "POST", "/api/v1/workspaces", map[string]any{"name": "dc", "agent": "plain", "devcontainer": dc})
			if status != http.StatusBadRequest {
				t.Fatalf("no registry: %d %s", status, out)
			}
			vs := apiError(t, out).Validations
			if len(vs) != 1 || vs[0].Field != "devcontainer.features" {
				t.Fatalf("validations %+v, want one on devcontainer.features", vs)
			}
			m := regexp.MustCompile(`needs an image build \(build hash ([0-9a-f]{64})\), and this agent does not build images: an admin sets the agent's image_build.registry`).FindStringSubmatch(vs[0].Detail)
			if m == nil {
				t.Fatalf("detail %q gives no build hash", vs[0].Detail)
			}
			hash := m[1]
			if _, after := call(t, env, user, "GET", "/api/v1/workspaces", nil); string(after) != string(before) {
				t.Errorf("a refused create wrote something:\nbefore %s\nafter  %s", before, after)
			}

			buildsToken := createAgent(t, env, "builds", map[string]any{"image_build": map[string]any{"registry": "registry.hangar-system.svc:5000/hangar/builds",
				"push_secret": map[string]any{"name": "builds-push", "namespace": "hangar-system"}}})
			createAgent(t, env, "mapped", map[string]any{"image_build": map[string]any{"prebuilt": []any{map[string]any{"hash": hash, "image": "registry.example.com/team/node-dev:1"}}}})
			for _, agent := range []string{"builds", "mapped"} {
				var w sdk.Workspace
				mustCall(t, env, user, "POST", "/api/v1/workspaces", map[string]any{"name": "dc-" + agent, "agent": agent, "devcontainer": dc}, http.StatusCreated, &w)
				if !slices.ContainsFunc(w.Warnings, func(s string) bool { return strings.Contains(s, "build hash "+hash) }) {
					t.Errorf("%s: warnings %q do not give the build hash", agent, w.Warnings)
				}
			}
			// The agent is sent the build (its init container, the main container running the
			// build's image) and the push secret to copy into the namespace.
			resp := reconcileCall(t, env, buildsToken, protocol.ReconcileRequest{UpdateType: protocol.UpdateFull, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
			if len(resp.WorkspaceRailsInfos) != 1 {
				t.Fatalf("rails infos %+v, want the one workspace", resp.WorkspaceRailsInfos)
			}
			info := resp.WorkspaceRailsInfos[0]
			if !slices.Contains(info.ImagePullSecrets, protocol.ImagePullSecret{Name: "builds-push", Namespace: "hangar-system"}) {
				t.Errorf("image pull secrets %+v lack the push secret", info.ImagePullSecrets)
			}
			for _, want := range []string{"name: hangar-image-build", "image: registry.hangar-system.svc:5000/hangar/builds:" + hash, "pod-security.kubernetes.io/enforce: baseline"} {
				if !strings.Contains(info.ConfigToApply, want) {
					t.Errorf("config to apply lacks %q", want)
				}
			}
		})
	}
}
