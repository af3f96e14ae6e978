package server_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestBuildBadBodies sends each kind of bad input to the Terraform backend's endpoints: a 400 names
// the field, a content type other than JSON is a 415, and nothing is written.
func TestBuildBadBodies(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			te := newTFEnv(t, engine)
			env := te.Env
			admin := env.AdminToken
			alice := createUser(t, env, "alice")
			p := worker{t, env, te.Prov, "host-1"}
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "template": "tf"}, http.StatusCreated, nil)
			job := p.run("w", 1, protocol.FinishRequest{State: tfState(1)})
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "r", "template": "tf"}, http.StatusCreated, nil)
			running := p.mustAcquire("r", 1)
			heartbeat := strings.Replace(protocol.ProvisionerHeartbeatPath, "{id}", running.ID, 1)
			logs := strings.Replace(protocol.ProvisionerLogsPath, "{id}", running.ID, 1)
			finish := strings.Replace(protocol.ProvisionerFinishPath, "{id}", running.ID, 1)
			archive := base64.StdEncoding.EncodeToString(te.Archive)
			notGzip := base64.StdEncoding.EncodeToString([]byte("not a tar"))
			emptyModule := base64.StdEncoding.EncodeToString(tfArchive(t, map[string]string{"README.md": "no module"}))
			badModule := base64.StdEncoding.EncodeToString(tfArchive(t, map[string]string{"main.tf": "variable \"x\" {"}))
			tooManyLines := `{"worker_id":"host-1","lines":[` + strings.Repeat(`{"output":"x"},`, protocol.MaxLogLinesPerRequest) + `{"output":"x"}]}`
			longWorker := strings.Repeat("w", 201)
			before := buildSnapshot(t, env, alice)

			tests := []struct {
				name, token, method, path, contentType, body string
				status                                       int
				field                                        string
			}{
				// POST /templates/{name}/versions
				{"template: malformed", admin, "POST", "/api/v1/templates/t2/versions", "", `{"kind":`, 400, "body"},
				{"template: unknown kind", admin, "POST", "/api/v1/templates/t2/versions", "", `{"kind":"helm"}`, 400, "kind"},
				{"template: no kind", admin, "POST", "/api/v1/templates/t2/versions", "", `{}`, 400, "kind"},
				{"template: bad name", admin, "POST", "/api/v1/templates/Bad_Name/versions", "", `{"kind":"terraform","archive":"` + archive + `"}`, 400, "name"},
				{"template: no archive", admin, "POST", "/api/v1/templates/t2/versions", "", `{"kind":"terraform"}`, 400, "archive"},
				{"template: archive not gzip", admin, "POST", "/api/v1/templates/t2/versions", "", `{"kind":"terraform","archive":"` + notGzip + `"}`, 400, "archive"},
				{"template: archive without a module", admin, "POST", "/api/v1/templates/t2/versions", "", `{"kind":"terraform","archive":"` + emptyModule + `"}`, 400, "archive"},
				{"template: module syntax error", admin, "POST", "/api/v1/templates/t2/versions", "", `{"kind":"terraform","archive":"` + badModule + `"}`, 400, "archive"},
				{"template: archive of the wrong type", admin, "POST", "/api/v1/templates/t2/versions", "", `{"kind":"terraform","archive":7}`, 400, "archive"},
				{"template: archive not base64", admin, "POST", "/api/v1/templates/t2/versions", "", `{"kind":"terraform","archive":"***"}`, 400, "body"},
				{"template: devfile with terraform", admin, "POST", "/api/v1/templates/t2/versions", "", `{"kind":"terraform","archive":"` + archive + `","devfile":"x"}`, 400, "devfile"},
				{"template: archive with kubernetes", admin, "POST", "/api/v1/templates/t2/versions", "", `{"kind":"kubernetes","archive":"` + archive + `"}`, 400, "archive"},
				{"template: bad devfile", admin, "POST", "/api/v1/templates/t2/versions", "", `{"kind":"kubernetes","devfile":"schemaVersion: 2.0.0"}`, 400, "devfile"},
				{"template: unknown field", admin, "POST", "/api/v1/templates/t2/versions", "", `{"kind":"terraform","module":"x"}`, 400, "module"},
				{"template: trailing data", admin, "POST", "/api/v1/templates/t2/versions", "", `{"kind":"terraform","archive":"` + archive + `"} {}`, 400, "body"},
				{"template: empty body", admin, "POST", "/api/v1/templates/t2/versions", "", ``, 400, "body"},
				{"template: other kind, same name", admin, "POST", "/api/v1/templates/tf/versions", "", `{"kind":"kubernetes","devfile":"schemaVersion: 2.2.0\ncomponents:\n- name: main\n  container:\n    image: alpine\n"}`, 409, ""},
				{"template: text/plain", admin, "POST", "/api/v1/templates/t2/versions", "text/plain", `{"kind":"terraform","archive":"` + archive + `"}`, 415, ""},
				{"template: not an admin", alice, "POST", "/api/v1/templates/t2/versions", "", `{"kind":"terraform","archive":"` + archive + `"}`, 403, ""},

				// POST /workspaces with a template
				{"workspace: unknown template", alice, "POST", "/api/v1/workspaces", "", `{"name":"x","template":"nope"}`, 400, "template"},
				{"workspace: agent with a terraform template", alice, "POST", "/api/v1/workspaces", "", `{"name":"x","template":"tf","agent":"k1"}`, 400, "template"},
				{"workspace: bad name with a terraform template", alice, "POST", "/api/v1/workspaces", "", `{"name":"X_","template":"tf"}`, 400, "name"},
				{"workspace: name taken", alice, "POST", "/api/v1/workspaces", "", `{"name":"w","template":"tf"}`, 409, ""},

				// POST /workspaces/{name}/builds
				{"build: malformed", alice, "POST", "/api/v1/workspaces/w/builds", "", `{"transition":`, 400, "body"},
				{"build: unknown transition", alice, "POST", "/api/v1/workspaces/w/builds", "", `{"transition":"restart"}`, 400, "transition"},
				{"build: no transition", alice, "POST", "/api/v1/workspaces/w/builds", "", `{}`, 400, "transition"},
				{"build: transition of the wrong type", alice, "POST", "/api/v1/workspaces/w/builds", "", `{"transition":1}`, 400, "transition"},
				{"build: orphan start", alice, "POST", "/api/v1/workspaces/w/builds", "", `{"transition":"start","orphan":true}`, 400, "orphan"},
				{"build: orphan of the wrong type", alice, "POST", "/api/v1/workspaces/w/builds", "", `{"transition":"delete","orphan":"yes"}`, 400, "orphan"},
				{"build: orphan with a state", alice, "POST", "/api/v1/workspaces/w/builds", "", `{"transition":"delete","orphan":true,"state":"e30="}`, 400, "state"},
				{"build: state not an object", alice, "POST", "/api/v1/workspaces/w/builds", "", `{"transition":"start","state":"WzFd"}`, 400, "state"},
				{"build: state not JSON", alice, "POST", "/api/v1/workspaces/w/builds", "", `{"transition":"start","state":"bm90IGpzb24="}`, 400, "state"},
				{"build: empty state", alice, "POST", "/api/v1/workspaces/w/builds", "", `{"transition":"start","state":""}`, 400, "state"},
				{"build: state of the wrong type", alice, "POST", "/api/v1/workspaces/w/builds", "", `{"transition":"start","state":{}}`, 400, "state"},
				{"build: unknown field", alice, "POST", "/api/v1/workspaces/w/builds", "", `{"transition":"start","force":true}`, 400, "force"},
				{"build: text/plain", alice, "POST", "/api/v1/workspaces/w/builds", "text/plain", `{"transition":"start"}`, 415, ""},
				{"build: of a missing workspace", alice, "POST", "/api/v1/workspaces/nope/builds", "", `{"transition":"start"}`, 404, ""},
				{"build: bad number", alice, "GET", "/api/v1/workspaces/w/builds/first", "", ``, 400, "number"},
				{"build: missing", alice, "GET", "/api/v1/workspaces/w/builds/7", "", ``, 404, ""},
				{"cancel: bad number", alice, "POST", "/api/v1/workspaces/w/builds/0/cancel", "", ``, 400, "number"},
				{"cancel: missing", alice, "POST", "/api/v1/workspaces/w/builds/7/cancel", "", ``, 404, ""},
				{"cancel: ended", alice, "POST", "/api/v1/workspaces/w/builds/1/cancel", "", ``, 409, ""},

				// GET and PUT /workspaces/{name}/state
				{"state pull: bad build", alice, "GET", "/api/v1/workspaces/w/state?build=x", "", ``, 400, "build"},
				{"state pull: missing build", alice, "GET", "/api/v1/workspaces/w/state?build=5", "", ``, 404, ""},
				{"state push: empty", alice, "PUT", "/api/v1/workspaces/w/state", "", ``, 400, "body"},
				{"state push: not JSON", alice, "PUT", "/api/v1/workspaces/w/state", "", `version = 4`, 400, "body"},
				{"state push: not an object", alice, "PUT", "/api/v1/workspaces/w/state", "", `[{"version":4}]`, 400, "body"},
				{"state push: truncated", alice, "PUT", "/api/v1/workspaces/w/state", "", `{"version":4,`, 400, "body"},
				{"state push: text/plain", alice, "PUT", "/api/v1/workspaces/w/state", "text/plain", `{"version":4}`, 415, ""},
				{"state push: octet-stream", alice, "PUT", "/api/v1/workspaces/w/state", "application/octet-stream", `{"version":4}`, 415, ""},
				{"state push: while a build runs", alice, "PUT", "/api/v1/workspaces/r/state", "", string(tfState(2)), 409, ""},
				{"state push: an empty object", alice, "PUT", "/api/v1/workspaces/w/state", "", `{}`, 400, "version"},
				{"state push: version of the wrong type", alice, "PUT", "/api/v1/workspaces/w/state", "", `{"version":"4","terraform_version":"1.9.8","serial":2,"lineage":"hangar-test"}`, 400, "version"},
				{"state push: no terraform_version", alice, "PUT", "/api/v1/workspaces/w/state", "", `{"version":4,"serial":2,"lineage":"hangar-test"}`, 400, "terraform_version"},
				{"state push: negative serial", alice, "PUT", "/api/v1/workspaces/w/state", "", `{"version":4,"terraform_version":"1.9.8","serial":-1,"lineage":"hangar-test"}`, 400, "serial"},
				{"state push: fractional serial", alice, "PUT", "/api/v1/workspaces/w/state", "", `{"version":4,"terraform_version":"1.9.8","serial":2.5,"lineage":"hangar-test"}`, 400, "serial"},
				{"state push: no lineage", alice, "PUT", "/api/v1/workspaces/w/state", "", `{"version":4,"terraform_version":"1.9.8","serial":2}`, 400, "lineage"},
				{"state push: empty lineage", alice, "PUT", "/api/v1/workspaces/w/state", "", `{"version":4,"terraform_version":"1.9.8","serial":2,"lineage":""}`, 400, "lineage"},
				{"state push: force not a boolean", alice, "PUT", "/api/v1/workspaces/w/state?force=yes", "", string(tfState(2)), 400, "force"},
				{"state push: {} with force", alice, "PUT", "/api/v1/workspaces/w/state?force=true", "", `{}`, 400, "version"},

				// POST /provisioners
				{"provisioner: malformed", admin, "POST", "/api/v1/provisioners", "", `{"name"`, 400, "body"},
				{"provisioner: bad name", admin, "POST", "/api/v1/provisioners", "", `{"name":"Bad_Name"}`, 400, "name"},
				{"provisioner: no name", admin, "POST", "/api/v1/provisioners", "", `{}`, 400, "name"},
				{"provisioner: name of the wrong type", admin, "POST", "/api/v1/provisioners", "", `{"name":["p"]}`, 400, "name"},
				{"provisioner: unknown field", admin, "POST", "/api/v1/provisioners", "", `{"name":"p9","tags":[]}`, 400, "tags"},
				{"provisioner: text/plain", admin, "POST", "/api/v1/provisioners", "text/plain", `{"name":"p9"}`, 415, ""},

				// The provisioner protocol.
				{"acquire: malformed", te.Prov, "POST", protocol.ProvisionerAcquirePath, "", `{"worker_id":`, 400, "body"},
				{"acquire: no worker id", te.Prov, "POST", protocol.ProvisionerAcquirePath, "", `{}`, 400, "worker_id"},
				{"acquire: worker id too long", te.Prov, "POST", protocol.ProvisionerAcquirePath, "", `{"worker_id":"` + longWorker + `"}`, 400, "worker_id"},
				{"acquire: wait of the wrong type", te.Prov, "POST", protocol.ProvisionerAcquirePath, "", `{"worker_id":"h","wait_seconds":"10"}`, 400, "wait_seconds"},
				{"acquire: fractional wait", te.Prov, "POST", protocol.ProvisionerAcquirePath, "", `{"worker_id":"h","wait_seconds":1.5}`, 400, "wait_seconds"},
				{"acquire: unknown field", te.Prov, "POST", protocol.ProvisionerAcquirePath, "", `{"worker_id":"h","tags":["a"]}`, 400, "tags"},
				{"acquire: text/plain", te.Prov, "POST", protocol.ProvisionerAcquirePath, "text/plain", `{"worker_id":"h"}`, 415, ""},
				{"heartbeat: malformed", te.Prov, "POST", heartbeat, "", `[`, 400, "body"},
				{"heartbeat: no worker id", te.Prov, "POST", heartbeat, "", `{"wait_seconds":1}`, 400, "worker_id"},
				{"heartbeat: wait of the wrong type", te.Prov, "POST", heartbeat, "", `{"worker_id":"host-1","wait_seconds":true}`, 400, "wait_seconds"},
				{"heartbeat: text/plain", te.Prov, "POST", heartbeat, "text/plain", `{"worker_id":"host-1"}`, 415, ""},
				{"logs: malformed", te.Prov, "POST", logs, "", `{"worker_id":"host-1","lines":[`, 400, "body"},
				{"logs: no worker id", te.Prov, "POST", logs, "", `{"lines":[]}`, 400, "worker_id"},
				{"logs: lines of the wrong type", te.Prov, "POST", logs, "", `{"worker_id":"host-1","lines":{}}`, 400, "lines"},
				{"logs: output of the wrong type", te.Prov, "POST", logs, "", `{"worker_id":"host-1","lines":[{"output":5}]}`, 400, "lines.output"},
				{"logs: too many lines", te.Prov, "POST", logs, "", tooManyLines, 400, "lines"},
				{"logs: unknown field", te.Prov, "POST", logs, "", `{"worker_id":"host-1","lines":[{"text":"x"}]}`, 400, "text"},
				{"logs: text/plain", te.Prov, "POST", logs, "text/plain", `{"worker_id":"host-1","lines":[]}`, 415, ""},
				{"finish: malformed", te.Prov, "POST", finish, "", `{"worker_id":"host-1",}`, 400, "body"},
				{"finish: no worker id", te.Prov, "POST", finish, "", `{"error":"x"}`, 400, "worker_id"},
				{"finish: state of the wrong type", te.Prov, "POST", finish, "", `{"worker_id":"host-1","state":5}`, 400, "state"},
				{"finish: canceled of the wrong type", te.Prov, "POST", finish, "", `{"worker_id":"host-1","canceled":"yes"}`, 400, "canceled"},
				{"finish: error of the wrong type", te.Prov, "POST", finish, "", `{"worker_id":"host-1","error":{}}`, 400, "error"},
				{"finish: unknown field", te.Prov, "POST", finish, "", `{"worker_id":"host-1","outputs":{}}`, 400, "outputs"},
				{"finish: text/plain", te.Prov, "POST", finish, "text/plain", `{"worker_id":"host-1"}`, 415, ""},
				{"finish: of an ended job", te.Prov, "POST", strings.Replace(protocol.ProvisionerFinishPath, "{id}", job.ID, 1), "", `{"worker_id":"host-1"}`, 409, ""},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					var body io.Reader
					if tc.body != "" || tc.method != "GET" {
						body = strings.NewReader(tc.body)
					}
					ct := tc.contentType
					if ct == "" && body != nil {
						ct = "application/json"
					}
					status, _, got := send(t, env, tc.token, tc.method, tc.path, ct, body)
					if status != tc.status {
						t.Fatalf("status %d, want %d: %s", status, tc.status, got)
					}
					if e := apiError(t, got); e.Message == "" {
						t.Errorf("no message: %s", got)
					}
					if tc.field != "" {
						wantField(t, tc.name, status, got, tc.field)
					}
					if after := buildSnapshot(t, env, alice); after != before {
						t.Errorf("something was written:\nbefore %s\nafter  %s", before, after)
					}
				})
			}
		})
	}
}

// buildSnapshot is everything of the Terraform backend the admin and alice can see, as one string.
func buildSnapshot(t *testing.T, env *servertest.Env, user string) string {
	t.Helper()
	var ws []sdk.Workspace
	mustCall(t, env, env.AdminToken, "GET", "/api/v1/workspaces", nil, http.StatusOK, &ws)
	var ts []sdk.Template
	mustCall(t, env, env.AdminToken, "GET", "/api/v1/templates", nil, http.StatusOK, &ts)
	var ps []sdk.Provisioner
	mustCall(t, env, env.AdminToken, "GET", "/api/v1/provisioners", nil, http.StatusOK, &ps)
	out := map[string]any{"workspaces": ws, "templates": ts, "provisioners": len(ps)}
	for _, w := range ws {
		bs := listBuilds(t, env, user, w.Name)
		_, state, _ := pullState(t, env, user, w.Name, "")
		out[w.Name] = map[string]any{"builds": bs, "state": string(state), "log": len(logLines(t, env, user, w.Name, 0, ""))}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// TestBuildBodyLimits: a body over each Terraform endpoint's limit is a 413 naming the limit.
// Limits do not depend on the store: SQLite only. Bodies are streamed, so the test holds none.
func TestBuildBodyLimits(t *testing.T) {
	te := newTFEnv(t, "sqlite")
	env := te.Env
	alice := createUser(t, env, "alice")
	p := worker{t, env, te.Prov, "host-1"}
	mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "template": "tf"}, http.StatusCreated, nil)
	job := p.mustAcquire("w", 1)
	jobPath := func(path string) string { return strings.Replace(path, "{id}", job.ID, 1) }
	userLimit := int64(sdk.MaxBodyBytes)
	for _, tc := range []struct {
		name, token, method, path, prefix string
		limit                             int64
	}{
		{"template push", env.AdminToken, "POST", "/api/v1/templates/big/versions", `{"kind":"terraform","archive":"`, sdk.MaxTemplateArchiveBytes/3*4 + 1<<20},
		{"build", alice, "POST", "/api/v1/workspaces/w/builds", `{"transition":"start","state":"`, protocol.MaxStateBytes/3*4 + 1<<20},
		{"state push", alice, "PUT", "/api/v1/workspaces/w/state", `{"version":4,"pad":"`, protocol.MaxStateBytes},
		{"provisioner", env.AdminToken, "POST", "/api/v1/provisioners", `{"name":"`, userLimit},
		{"acquire", te.Prov, "POST", protocol.ProvisionerAcquirePath, `{"worker_id":"`, userLimit},
		{"heartbeat", te.Prov, "POST", jobPath(protocol.ProvisionerHeartbeatPath), `{"worker_id":"`, userLimit},
		{"logs", te.Prov, "POST", jobPath(protocol.ProvisionerLogsPath), `{"worker_id":"host-1","lines":[{"output":"`, protocol.MaxProvisionerBodyBytes},
		{"finish", te.Prov, "POST", jobPath(protocol.ProvisionerFinishPath), `{"worker_id":"host-1","state":"`, protocol.MaxProvisionerBodyBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := io.MultiReader(strings.NewReader(tc.prefix), &repeatReader{b: 'A', n: tc.limit - int64(len(tc.prefix)) + 1}, strings.NewReader(`"}`))
			status, _, got := send(t, env, tc.token, tc.method, tc.path, "application/json", body)
			if status != http.StatusRequestEntityTooLarge {
				t.Fatalf("status %d, want 413: %.300s", status, got)
			}
			if e := apiError(t, got); e.Detail != fmt.Sprintf("the limit is %d bytes", tc.limit) {
				t.Errorf("413 detail %q, want the limit %d", e.Detail, tc.limit)
			}
		})
	}
	// A body within the limit but a value over its own: 400 naming the field.
	big := make([]byte, sdk.MaxTemplateArchiveBytes+1)
	status, body := call(t, env, env.AdminToken, "POST", "/api/v1/templates/big/versions", sdk.CreateTemplateVersionRequest{Kind: "terraform", Archive: big})
	wantField(t, "archive over 16 MiB", status, body, "archive")
	// The job was untouched by all this.
	if b := getBuild(t, env, alice, "w", 1); b.Status != "running" || b.HasState {
		t.Errorf("build after oversized bodies %+v", b)
	}
	if ls := logLines(t, env, alice, "w", 1, ""); len(ls) != 0 {
		t.Errorf("log after oversized bodies %+v", ls)
	}
	var ts []sdk.Template
	mustCall(t, env, env.AdminToken, "GET", "/api/v1/templates", nil, http.StatusOK, &ts)
	if len(ts) != 1 {
		t.Errorf("templates after oversized pushes %+v", ts)
	}
}

// TestNULInPathOrQuery: a NUL character in a name or a parameter is a 400, on both stores (Postgres
// refuses NUL in text, which was a 500).
func TestNULInPathOrQuery(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			te := newTFEnv(t, engine)
			for _, path := range []string{"/api/v1/workspaces/a%00b", "/api/v1/workspaces/a%00b/builds", "/api/v1/templates/t%00", "/api/v1/workspaces/w/state?build=1%00"} {
				status, _, body := send(t, te.Env, te.Env.AdminToken, "GET", path, "", nil)
				wantField(t, "GET "+path, status, body, "path")
			}
		})
	}
}
