package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestDeleteTemplate: DELETE /api/v1/templates/{name} is for admins; it is refused (409) while a
// workspace of the template is not Terminated or a preset of it exists, the answer saying how many
// workspaces and which, and which presets; nothing is deleted then. Once they are gone the template
// is deleted: no longer found nor listed, its terminated workspace keeps its builds and the
// template's name, the name may be pushed again as a new template, and the audit log has the
// refusal and the delete.
func TestDeleteTemplate(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			te := newTFEnv(t, engine)
			env := te.Env
			alice := createUser(t, env, "alice")
			p := worker{t, env, te.Prov, "host-1"}
			for _, name := range []string{"w", "x"} {
				mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": name, "template": "tf"}, http.StatusCreated, nil)
				p.run(name, 1, protocol.FinishRequest{State: tfState(1)})
			}
			mustCall(t, env, env.AdminToken, "PUT", "/api/v1/templates/tf/presets/small", sdk.PutPresetRequest{Instances: 0}, http.StatusOK, nil)

			if status, body := call(t, env, alice, "DELETE", "/api/v1/templates/tf", nil); status != http.StatusForbidden {
				t.Fatalf("a user's delete: %d %s", status, body)
			}
			if status, body := call(t, env, env.AdminToken, "DELETE", "/api/v1/templates/nope", nil); status != http.StatusNotFound {
				t.Fatalf("delete of an unknown template: %d %s", status, body)
			}
			inUse := func(want string) {
				t.Helper()
				status, body := call(t, env, env.AdminToken, "DELETE", "/api/v1/templates/tf", nil)
				if status != http.StatusConflict || !strings.Contains(string(body), want) {
					t.Fatalf("delete while in use: %d %s; want 409 saying %q", status, body, want)
				}
				mustCall(t, env, env.AdminToken, "GET", "/api/v1/templates/tf", nil, http.StatusOK, nil)
			}
			inUse(`template \"tf\" is used by 2 workspaces that are not deleted (alice/w, alice/x): delete them first (hangar delete), and wait for their deletes to end; ` +
				`and by preset small: delete it first (hangar templates preset tf PRESET --delete)`)

			mustCall(t, env, env.AdminToken, "DELETE", "/api/v1/templates/tf/presets/small", nil, http.StatusNoContent, nil)
			// One delete at a time: two builds queued at the same instant may be acquired in either order.
			mustCall(t, env, alice, "POST", "/api/v1/workspaces/w/builds", map[string]any{"transition": "delete"}, http.StatusCreated, nil)
			p.run("w", 2, protocol.FinishRequest{State: tfState(2)})
			mustCall(t, env, alice, "POST", "/api/v1/workspaces/x/builds", map[string]any{"transition": "delete"}, http.StatusCreated, nil)
			// x's delete is queued, not done: x is not Terminated yet.
			inUse(`template \"tf\" is used by 1 workspace that is not deleted (alice/x)`)
			p.run("x", 2, protocol.FinishRequest{State: tfState(2)})

			mustCall(t, env, env.AdminToken, "DELETE", "/api/v1/templates/tf", nil, http.StatusNoContent, nil)
			if status, body := call(t, env, alice, "GET", "/api/v1/templates/tf", nil); status != http.StatusNotFound {
				t.Fatalf("the deleted template: %d %s", status, body)
			}
			var ts []sdk.Template
			mustCall(t, env, alice, "GET", "/api/v1/templates", nil, http.StatusOK, &ts)
			if len(ts) != 0 {
				t.Fatalf("templates after the delete: %+v", ts)
			}
			if status, body := call(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "y", "template": "tf"}); status != http.StatusBadRequest && status != http.StatusNotFound {
				t.Fatalf("a create from the deleted template: %d %s", status, body)
			}
			if bs := listBuilds(t, env, alice, "w"); len(bs) != 2 {
				t.Fatalf("w's builds after the template's delete: %+v", bs)
			}
			if ws := getWorkspace(t, env, alice, "w"); ws.Template != "tf" || ws.ActualState != "Terminated" {
				t.Fatalf("w after the template's delete: %+v", ws)
			}

			// The name is free: a new template, from version 1.
			var tmpl sdk.Template
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/templates/tf/versions",
				sdk.CreateTemplateVersionRequest{Kind: "terraform", Archive: te.Archive}, http.StatusCreated, &tmpl)
			if tmpl.ActiveVersion != 1 || len(tmpl.Versions) != 1 {
				t.Fatalf("the new template tf: %+v", tmpl)
			}

			entries := auditPage(t, env, "action=template.delete").Entries
			if len(entries) < 3 {
				t.Fatalf("template.delete entries: %+v", entries)
			}
			wantEntry(t, entries[0], "admin", "template.delete", "template", "tf", "success")
			if e := entries[1]; e.Outcome != "failure" || !strings.Contains(e.Error, "alice/x") {
				t.Fatalf("the refused delete's entry: %+v", e)
			}
		})
	}
}
