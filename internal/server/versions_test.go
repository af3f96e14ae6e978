package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// versionModule is the module of version 2 of "tf" in TestTemplateVersionsAndParameters: three
// parameters (a mutable number with a validation, a required immutable string, a sensitive one).
const versionModule = tfModuleSource + `
# hangar:mutable
variable "size" {
  type        = number
  default     = 1
  description = "How many"
  validation {
    condition     = var.size >= 1 && var.size <= 4
    error_message = "size must be 1 to 4."
  }
}

variable "zone" {
  type = string
  validation {
    condition     = can(regex("^[a-z]+-[0-9]$", var.zone))
    error_message = "zone looks like eu-1."
  }
}

variable "api_key" {
  type      = string
  sensitive = true
}
`

// TestTemplateVersionsAndParameters: a version pushed inactive, versions, promote, pull (admins
// only), parameters at create (missing, invalid, unknown: 400 naming the parameter; nothing
// created), the values a build passes, sensitive values never echoed, the outdated flag, and
// update: a stop on the old version then a start on the active one, an immutable value refused,
// an up-to-date workspace left alone. The test plays the provisioner over HTTP.
func TestTemplateVersionsAndParameters(t *testing.T) {
	const secret = "key-SENSITIVE-4242"
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			te := newTFEnv(t, engine)
			env := te.Env
			alice := createUser(t, env, "alice")
			p := worker{t, env, te.Prov, "host-1"}

			// alice's workspace on version 1 (no parameters).
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "template": "tf"}, http.StatusCreated, nil)
			p.run("w", 1, protocol.FinishRequest{State: tfState(1)})

			// Version 2, pushed without becoming active.
			v2 := tfArchive(t, map[string]string{"main.tf": versionModule})
			var tmpl sdk.Template
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/templates/tf/versions",
				map[string]any{"kind": "terraform", "archive": v2, "activate": false}, http.StatusCreated, &tmpl)
			if tmpl.ActiveVersion != 1 || len(tmpl.Versions) != 1 || tmpl.Versions[0].Number != 2 || tmpl.Versions[0].Active {
				t.Fatalf("inactive push = %+v", tmpl)
			}
			var vs []sdk.TemplateVersion
			mustCall(t, env, alice, "GET", "/api/v1/templates/tf/versions", nil, http.StatusOK, &vs)
			if len(vs) != 2 || vs[0].Number != 2 || vs[0].Active || !vs[1].Active || len(vs[0].Parameters) != 3 {
				t.Fatalf("versions = %+v", vs)
			}
			params := map[string]sdk.TemplateParameter{}
			for _, p := range vs[0].Parameters {
				params[p.Name] = p
			}
			if s := params["size"]; s.Type != "number" || s.Required || s.Default != "1" || !s.Mutable || s.Validations != 1 || s.Description != "How many" {
				t.Errorf("size = %+v", s)
			}
			if z := params["zone"]; !z.Required || z.Mutable || z.Sensitive {
				t.Errorf("zone = %+v", z)
			}
			if k := params["api_key"]; !k.Required || !k.Sensitive {
				t.Errorf("api_key = %+v", k)
			}
			if _, ok := params["start_count"]; ok {
				t.Error("start_count, which Hangar supplies, is listed as a parameter")
			}
			// A new workspace still gets version 1, and alice's is not outdated.
			if w := getWorkspace(t, env, alice, "w"); w.TemplateVersion != 1 || w.Outdated {
				t.Fatalf("w before the promote = %+v", w)
			}

			// Pull: admins only; the archive is the one pushed.
			status, h, body := send(t, env, env.AdminToken, "GET", "/api/v1/templates/tf/versions/2/archive", "", nil)
			if status != http.StatusOK || !bytes.Equal(body, v2) || h.Get("Hangar-Template-Version") != "2" || h.Get("Content-Type") != "application/gzip" {
				t.Fatalf("pull version 2: %d %q %d bytes", status, h, len(body))
			}
			if status, _, body := send(t, env, env.AdminToken, "GET", "/api/v1/templates/tf/versions/active/archive", "", nil); status != http.StatusOK || !bytes.Equal(body, te.Archive) {
				t.Fatalf("pull the active version: %d", status)
			}
			if status, _, body := send(t, env, alice, "GET", "/api/v1/templates/tf/versions/2/archive", "", nil); status != http.StatusForbidden {
				t.Fatalf("pull by a user: %d %s, want 403", status, body)
			}
			if status, _, body := send(t, env, env.AdminToken, "GET", "/api/v1/templates/tf/versions/9/archive", "", nil); status != http.StatusNotFound {
				t.Fatalf("pull version 9: %d %s, want 404", status, body)
			}
			// Promote: admins only.
			if status, body := call(t, env, alice, "POST", "/api/v1/templates/tf/versions/2/promote", nil); status != http.StatusForbidden {
				t.Fatalf("promote by a user: %d %s", status, body)
			}
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/templates/tf/versions/2/promote", nil, http.StatusOK, &tmpl)
			if tmpl.ActiveVersion != 2 {
				t.Fatalf("promoted = %+v", tmpl)
			}
			// alice's workspace is now outdated, in the list and alone.
			if w := getWorkspace(t, env, alice, "w"); w.TemplateVersion != 1 || !w.Outdated {
				t.Fatalf("w after the promote = %+v", w)
			}
			var list []sdk.Workspace
			mustCall(t, env, alice, "GET", "/api/v1/workspaces", nil, http.StatusOK, &list)
			if len(list) != 1 || !list[0].Outdated {
				t.Fatalf("list after the promote = %+v", list)
			}

			// Create on version 2: missing, invalid and unknown parameters are refused before any
			// build, each named; nothing is created.
			for _, tc := range []struct {
				what   string
				params map[string]string
				field  string
			}{
				{"missing", map[string]string{"api_key": secret}, "parameters.zone"},
				{"not a number", map[string]string{"zone": "eu-1", "api_key": secret, "size": "lots"}, "parameters.size"},
				{"condition", map[string]string{"zone": "eu-1", "api_key": secret, "size": "9"}, "parameters.size"},
				{"regex condition", map[string]string{"zone": "Europe", "api_key": secret}, "parameters.zone"},
				{"unknown", map[string]string{"zone": "eu-1", "api_key": secret, "color": "red"}, "parameters.color"},
			} {
				status, body := call(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "v", "template": "tf", "parameters": tc.params})
				wantField(t, tc.what, status, body, tc.field)
				if bytes.Contains(body, []byte(secret)) {
					t.Errorf("%s: the answer echoes the sensitive value: %s", tc.what, body)
				}
			}
			if status, body := call(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "v", "template": "tf", "parameters": map[string]string{"zone": "eu-1", "api_key": secret, "size": "9"}}); strings.Contains(string(body), "size must be 1 to 4.") == false {
				t.Errorf("the validation's error_message is not in the answer: %d %s", status, body)
			}
			if status, _ := call(t, env, alice, "GET", "/api/v1/workspaces/v", nil); status != http.StatusNotFound {
				t.Fatalf("a refused create left a workspace: %d", status)
			}
			var v sdk.Workspace
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "v", "template": "tf",
				"parameters": map[string]string{"zone": "eu-1", "api_key": secret}}, http.StatusCreated, &v)
			if v.TemplateVersion != 2 || v.Outdated || len(v.Parameters) != 2 || v.Parameters[0] != (sdk.WorkspaceParameter{Name: "api_key", Sensitive: true}) ||
				v.Parameters[1] != (sdk.WorkspaceParameter{Name: "zone", Value: "eu-1"}) {
				t.Fatalf("created v = %+v", v)
			}
			job := p.mustAcquire("v", 1)
			if job.Variables["zone"] != "eu-1" || job.Variables["api_key"] != secret || job.Variables["start_count"] != "1" {
				t.Fatalf("v's job variables = %v", job.Variables)
			}
			p.finish(job.ID, protocol.FinishRequest{State: tfState(1)})
			_, _, body = send(t, env, alice, "GET", "/api/v1/workspaces/v", "", nil)
			if bytes.Contains(body, []byte(secret)) {
				t.Errorf("GET workspace echoes the sensitive value: %s", body)
			}

			// Update v: an immutable value may not change; a mutable one may (a restart on the
			// same version: stop, then start with the new value).
			status, body = call(t, env, alice, "POST", "/api/v1/workspaces/v/update", map[string]any{"parameters": map[string]string{"zone": "us-2"}})
			wantField(t, "immutable", status, body, "parameters.zone")
			if !strings.Contains(string(body), "immutable") {
				t.Errorf("immutable refusal: %s", body)
			}
			var up sdk.UpdateWorkspaceVersionResponse
			mustCall(t, env, alice, "POST", "/api/v1/workspaces/v/update", map[string]any{}, http.StatusOK, &up)
			if up.Result != "up-to-date" || len(listBuilds(t, env, alice, "v")) != 1 {
				t.Fatalf("update of an up-to-date workspace = %+v", up)
			}
			mustCall(t, env, alice, "POST", "/api/v1/workspaces/v/update", map[string]any{"parameters": map[string]string{"size": "3"}}, http.StatusOK, &up)
			if up.Result != "restart" || up.Workspace.DesiredState != "RestartRequested" {
				t.Fatalf("update of a mutable value = %+v", up)
			}
			p.run("v", 2, protocol.FinishRequest{State: tfState(2)})
			job = p.mustAcquire("v", 3)
			if job.Transition != "start" || job.Variables["size"] != "3" || job.Variables["zone"] != "eu-1" {
				t.Fatalf("the update's start: %+v", job.Variables)
			}
			p.finish(job.ID, protocol.FinishRequest{State: tfState(3)})

			// Update w (version 1, no values): the start on version 2 needs zone and api_key.
			status, body = call(t, env, alice, "POST", "/api/v1/workspaces/w/update", map[string]any{})
			wantField(t, "update without the new required values", status, body, "parameters.zone")
			if status, body := call(t, env, alice, "POST", "/api/v1/workspaces/w/builds", map[string]any{"transition": "start"}); status != http.StatusConflict && status != http.StatusBadRequest {
				t.Fatalf("start of w, already running: %d %s", status, body)
			}
			mustCall(t, env, alice, "POST", "/api/v1/workspaces/w/update", map[string]any{"parameters": map[string]string{"zone": "eu-2", "api_key": secret}}, http.StatusOK, &up)
			if up.Result != "restart" {
				t.Fatalf("update of w = %+v", up)
			}
			if b := getBuild(t, env, alice, "w", 2); b.Transition != "stop" || b.TemplateVersion != 1 {
				t.Fatalf("the update's stop = %+v; want a stop on version 1 (the module that made the resources)", b)
			}
			p.run("w", 2, protocol.FinishRequest{State: tfState(2)})
			job = p.mustAcquire("w", 3)
			if !bytes.Equal(job.Archive, v2) || job.Variables["zone"] != "eu-2" {
				t.Fatalf("the update's start runs %d bytes with %v; want version 2's module", len(job.Archive), job.Variables)
			}
			p.finish(job.ID, protocol.FinishRequest{State: tfState(3)})
			if b := getBuild(t, env, alice, "w", 3); b.TemplateVersion != 2 {
				t.Fatalf("the update's start = %+v", b)
			}
			if w := getWorkspace(t, env, alice, "w"); w.TemplateVersion != 2 || w.Outdated || w.ActualState != "Running" || w.DesiredState != "Running" {
				t.Fatalf("w after the update = %+v", w)
			}
			// Stopped, then updated again after a new version: a start only.
			v3 := tfArchive(t, map[string]string{"main.tf": versionModule + "\n# v3\n"})
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/templates/tf/versions", map[string]any{"kind": "terraform", "archive": v3}, http.StatusCreated, &tmpl)
			newBuild(t, env, alice, "w", sdk.CreateBuildRequest{Transition: "stop"})
			p.run("w", 4, protocol.FinishRequest{State: tfState(4)})
			mustCall(t, env, alice, "POST", "/api/v1/workspaces/w/update", map[string]any{}, http.StatusOK, &up)
			if up.Result != "start" {
				t.Fatalf("update of a stopped workspace = %+v", up)
			}
			if b := getBuild(t, env, alice, "w", 5); b.Transition != "start" || b.TemplateVersion != 3 {
				t.Fatalf("the update's start = %+v", b)
			}
			if strings.Contains(te.Log.String(), secret) {
				t.Error("the server log holds the sensitive value")
			}

			// The audit log has the promotes and the updates, with the version promoted, and
			// never a sensitive value.
			promotes := auditPage(t, env, "action=template.promote&outcome=success").Entries
			if len(promotes) == 0 || promotes[len(promotes)-1].Details["version"] != float64(2) {
				t.Fatalf("promote entries %+v, want the first for version 2", promotes)
			}
			wantEntry(t, promotes[0], "admin", "template.promote", "template", "tf", "success")
			updates := auditPage(t, env, "action=workspace.update&target=w").Entries
			if len(updates) == 0 {
				t.Fatal("no audit entry for the updates of w")
			}
			wantEntry(t, updates[0], "alice", "workspace.update", "workspace", "alice/w", "success")
			all, err := json.Marshal(auditPage(t, env, "limit=1000"))
			if err != nil || strings.Contains(string(all), secret) {
				t.Errorf("the audit log holds the sensitive value (%v)", err)
			}
		})
	}
}

// TestPushRefusesUnsuppliableVariable: a required variable no user can give a value to is refused
// at push, naming it; today's first build would fail on it.
func TestPushRefusesUnsuppliableVariable(t *testing.T) {
	te := newTFEnv(t, "sqlite")
	archive := tfArchive(t, map[string]string{"main.tf": tfModuleSource + `variable "blob" { type = list(any) }`})
	status, body := call(t, te.Env, te.AdminToken, "POST", "/api/v1/templates/tf/versions", map[string]any{"kind": "terraform", "archive": archive})
	wantField(t, "list(any) without default", status, body, "archive")
	if !strings.Contains(string(body), `\"blob\"`) && !strings.Contains(string(body), `"blob"`) {
		t.Errorf("the refusal does not name the variable: %s", body)
	}
}
