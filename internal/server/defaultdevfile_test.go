package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/starters"
)

// TestAgentDefaultDevfile: an agent's default_devfile is what its workspaces created with neither a
// devfile nor a template are made from (the quick start's agent gives the Kubernetes starter, which
// opens the web editor on the image the local cluster preloads); an agent without one keeps the
// built-in default; a default_devfile that is not a devfile is refused on create and on PATCH,
// naming the field, and nothing is written.
func TestAgentDefaultDevfile(t *testing.T) {
	s, err := starters.Get("kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	df, err := s.File("devfile.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			createAgent(t, env, "local", map[string]any{"dns_zone": "workspaces.localhost", "proxy_url_scheme": "http", "default_devfile": string(df)})
			createAgent(t, env, "plain", nil)
			user := createUser(t, env, "dev")
			var w sdk.Workspace
			mustCall(t, env, user, "POST", "/api/v1/workspaces", map[string]any{"name": "first", "agent": "local"}, http.StatusCreated, &w)
			if want := "http://" + "60001-first--dev.workspaces.localhost/"; w.URL != want {
				t.Errorf("a workspace of the agent with a default devfile: URL %q, want the editor's %q", w.URL, want)
			}
			mustCall(t, env, user, "POST", "/api/v1/workspaces", map[string]any{"name": "other", "agent": "plain"}, http.StatusCreated, &w)
			if !strings.HasPrefix(w.URL, "https://3000-other--dev.") {
				t.Errorf("a workspace of the agent without one: URL %q, want the built-in default's port 3000", w.URL)
			}

			_, before := call(t, env, env.AdminToken, "GET", "/api/v1/agents", nil)
			bad := []struct{ name, devfile, detail string }{
				{"not YAML", "components: [", "is not a devfile"},
				{"no image", "schemaVersion: 2.2.0\ncomponents:\n  - name: dev\n    container: {}\n", "is not a devfile"},
				{"too large", "# " + strings.Repeat("x", sdk.MaxDevfileBytes), "the limit is"},
			}
			for _, tc := range bad {
				for _, req := range []struct{ method, path string }{{"POST", "/api/v1/agents"}, {"PATCH", "/api/v1/agents/local"}} {
					body := map[string]any{"config": map[string]any{"default_devfile": tc.devfile}}
					if req.method == "POST" {
						body["name"] = "k2"
					}
					status, out := call(t, env, env.AdminToken, req.method, req.path, body)
					if status != http.StatusBadRequest {
						t.Fatalf("%s %s with a default_devfile %s: %d %s", req.method, req.path, tc.name, status, out)
					}
					found := false
					for _, v := range apiError(t, out).Validations {
						found = found || v.Field == "config.default_devfile" && strings.Contains(v.Detail, tc.detail)
					}
					if !found {
						t.Errorf("%s %s with a default_devfile %s: no validation naming config.default_devfile (%q): %s", req.method, req.path, tc.name, tc.detail, out)
					}
				}
			}
			if _, after := call(t, env, env.AdminToken, "GET", "/api/v1/agents", nil); string(after) != string(before) {
				t.Errorf("a refused config was written:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}
