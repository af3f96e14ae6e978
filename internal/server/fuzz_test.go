package server_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// FuzzDecoders sends arbitrary bodies to every endpoint that decodes outside input and checks the
// server never fails with a 5xx and always answers a JSON object (or nothing, for a 204).
func FuzzDecoders(f *testing.F) {
	f.Add(uint8(0), []byte(`{"update_type":"partial","workspace_agent_infos":[{"name":"w","namespace":"hangar-w","latest_k8s_deployment_info":{"metadata":{"resourceVersion":"1"},"spec":{"replicas":1},"status":{"conditions":[{"type":"Progressing","reason":"NewReplicaSetAvailable"}]}}}]}`))
	f.Add(uint8(0), []byte(`{"update_type":"full","workspace_agent_infos":[{"name":"w","namespace":"hangar-w","termination_progress":"Terminated","error_details":{"error_type":"applier","error_message":"x"}}]}`))
	f.Add(uint8(1), []byte(`{"name":"w2","agent":"k1","devfile":"schemaVersion: 2.2.0\ncomponents:\n- name: main\n  container:\n    image: alpine\n"}`))
	f.Add(uint8(2), []byte(`{"desired_state":"Stopped"}`))
	f.Add(uint8(3), []byte(`{"name":"k9","config":{"dns_zone":"a.b","workspaces_quota":3}}`))
	f.Add(uint8(4), []byte(`{"username":"x"}`))
	f.Add(uint8(0), []byte(`{"update_type":"partial","workspace_agent_infos":null}`))
	f.Add(uint8(1), []byte(`[1,2,3]`))
	// The Terraform backend (endpoints 5 to 13).
	archive := base64.StdEncoding.EncodeToString(tfModule(f))
	f.Add(uint8(5), []byte(`{"kind":"terraform","archive":"`+archive+`"}`))
	f.Add(uint8(5), []byte(`{"kind":"kubernetes","devfile":"schemaVersion: 2.2.0\ncomponents:\n- name: main\n  container:\n    image: alpine\n"}`))
	f.Add(uint8(5), []byte(`{"kind":"terraform","archive":"H4sIAAAAAAAA/w=="}`))
	// A module nested 100,000 deep: refused before the HCL parser could overflow the stack.
	deep := base64.StdEncoding.EncodeToString(tfArchive(f, map[string]string{"main.tf": "x = " + strings.Repeat("[", 100_000) + "\n"}))
	f.Add(uint8(5), []byte(`{"kind":"terraform","archive":"`+deep+`"}`))
	f.Add(uint8(6), []byte(`{"transition":"stop"}`))
	f.Add(uint8(6), []byte(`{"transition":"delete","orphan":true}`))
	f.Add(uint8(6), []byte(`{"transition":"start","state":"eyJ2ZXJzaW9uIjo0fQ=="}`))
	f.Add(uint8(7), []byte(`{"name":"p2"}`))
	f.Add(uint8(8), []byte(`{"worker_id":"other","wait_seconds":60}`))
	f.Add(uint8(9), []byte(`{"worker_id":"fw","wait_seconds":60}`))
	f.Add(uint8(10), []byte(`{"worker_id":"fw","lines":[{"time":"2026-01-01T05:00:00Z","stage":"Applying","level":"info","output":"x\u0000"}]}`))
	f.Add(uint8(11), []byte(`{"worker_id":"fw","canceled":true,"error":"interrupted","state":"eyJ2ZXJzaW9uIjo0fQ=="}`))
	f.Add(uint8(11), []byte(`{"worker_id":"fw","error":"exit status 1"}`))
	f.Add(uint8(12), []byte(`{"version":4,"serial":1,"lineage":"x","outputs":{},"resources":[]}`))
	f.Add(uint8(13), []byte(`{"desired_state":"RestartRequested"}`))
	// Workspace references (owner/name) and the list's all (endpoints 14 and 15): the body is the
	// path value or the query value.
	f.Add(uint8(14), []byte(`admin/w`))
	f.Add(uint8(14), []byte(`nobody/w`))
	f.Add(uint8(14), []byte(`a/b/c`))
	f.Add(uint8(14), []byte(`/w`))
	f.Add(uint8(14), []byte(`w/`))
	f.Add(uint8(15), []byte(`true`))
	f.Add(uint8(15), []byte(`maybe`))
	// The access proxy (endpoints 16 to 19): exchange and check (JSON), the sign-in form and the
	// authorize query (HTML pages; the body is the form or the query).
	f.Add(uint8(16), []byte(`{"code":"hgc_x","host":"3000-w--admin.workspaces.localhost","nonce":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}`))
	f.Add(uint8(17), []byte(`{"host":"3000-w--admin.workspaces.localhost","token":"hgu_x"}`))
	f.Add(uint8(17), []byte(`{"host":"3000-w--admin.workspaces.localhost:8443","session":"hgw_x"}`))
	f.Add(uint8(17), []byte(`{"host":"3000-w--admin.workspaces.localhost","token":"hgu_x","client_address":"2001:db8::7"}`))
	f.Add(uint8(17), []byte(`{"host":"3000-w--admin.workspaces.localhost","token":"hgu_x","client_address":"fe80::1%eth0"}`))
	f.Add(uint8(18), []byte(`token=hgu_x&return_to=%2Fproxy%2Fauthorize%3Fhost%3Da`))
	f.Add(uint8(18), []byte(`token=&return_to=//evil`))
	f.Add(uint8(19), []byte(`host=3000-w--admin.workspaces.localhost&path=%2F&nonce=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef`))
	f.Add(uint8(19), []byte(`host=3000-w--admin.workspaces.localhost&path=//evil`))
	// A user's new token (endpoint 20): the body is the username in the path. Not the admin's own:
	// the fuzzer would lock itself out.
	f.Add(uint8(20), []byte(`fz-user`))
	f.Add(uint8(20), []byte(`nobody`))
	// SSH keys and the proxy's SSH side (endpoints 21 to 24): a key added, the SSH check, an activity
	// report, and a key removed (the body is the path value).
	fuzzKey, fuzzFingerprint := newKey(f, "fz@laptop")
	f.Add(uint8(21), []byte(`{"public_key":"`+fuzzKey+`"}`))
	f.Add(uint8(21), []byte(`{"name":"work","public_key":"# comment\n`+fuzzKey+`\n"}`))
	f.Add(uint8(22), []byte(`{"workspace":"w","public_key":"`+fuzzKey+`"}`))
	f.Add(uint8(22), []byte(`{"workspace":"admin/w","token":"hgu_x"}`))
	f.Add(uint8(22), []byte(`{"workspace":"admin/w","token":"hgu_x","client_address":"203.0.113.7"}`))
	f.Add(uint8(23), []byte(`{"activity":[{"workspace_id":"x","kind":"ssh","at":"2026-01-01T05:00:00Z"},{"workspace_id":"y","kind":"http","at":"2999-01-01T00:00:00Z"}]}`))
	f.Add(uint8(23), []byte(`{"activity":[{"workspace_id":"","kind":"ftp"}]}`))
	f.Add(uint8(24), []byte(fuzzFingerprint))
	f.Add(uint8(24), []byte(`SHA256:/../x`))
	// Parameters: at create (endpoint 1) and update (endpoint 25).
	f.Add(uint8(1), []byte(`{"name":"pw","template":"tf","parameters":{"size":"3","tags":"[\"a\"]"}}`))
	f.Add(uint8(25), []byte(`{"parameters":{"start_count":"x"}}`))
	f.Add(uint8(25), []byte(`{}`))

	// Waits (acquire, heartbeat) end at once, whatever wait_seconds says.
	now := func(time.Duration) <-chan time.Time {
		ch := make(chan time.Time, 1)
		ch <- time.Time{}
		return ch
	}
	var svc *tfbackend.Service
	env := servertest.NewWith(f, "sqlite", func(o *server.Options) {
		svc = tfbackend.New(tfbackend.Options{Store: o.Store, Clock: o.Clock, Logger: o.Logger, After: now})
		o.Builder = svc
	})
	admin := env.AdminToken
	agentToken := createAgent(f, env, "k1", nil)
	mustCall(f, env, admin, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "agent": "k1"}, http.StatusCreated, nil)
	mustCall(f, env, admin, "POST", "/api/v1/templates/tf/versions", sdk.CreateTemplateVersionRequest{Kind: "terraform", Archive: tfModule(f)}, http.StatusCreated, nil)
	mustCall(f, env, admin, "POST", "/api/v1/workspaces", map[string]any{"name": "tw", "template": "tf"}, http.StatusCreated, nil)
	createUser(f, env, "fz-user")
	var prov sdk.Provisioner
	mustCall(f, env, admin, "POST", "/api/v1/provisioners", sdk.CreateProvisionerRequest{Name: "p1"}, http.StatusCreated, &prov)

	// The job endpoints need a job that worker "fw" runs; the fuzzer may end it (finish, or an
	// acquire as "fw"), so each call makes sure there is one.
	var jobID string
	fresh := 0
	runningJob := func(t testing.TB) string {
		if jobID != "" {
			b, err := env.Store.BuildByJob(t.Context(), jobID)
			if err != nil {
				t.Fatal(err)
			}
			if b.Job.CompletedAt == nil && b.Job.WorkerID == prov.ID+"/fw" {
				return jobID
			}
		}
		fresh++
		mustCall(t, env, admin, "POST", "/api/v1/workspaces", map[string]any{"name": fmt.Sprintf("fz%d", fresh), "template": "tf"}, http.StatusCreated, nil)
		var r protocol.AcquireResponse
		mustCall(t, env, prov.Token, "POST", protocol.ProvisionerAcquirePath, protocol.AcquireRequest{WorkerID: "fw"}, http.StatusOK, &r)
		if r.Job == nil {
			t.Fatal("no job to acquire")
		}
		jobID = r.Job.ID
		return jobID
	}

	// The workspace endpoints need a terraform workspace without an active build, not deleted:
	// each call ends its active build (as a provisioner would) or makes a new workspace.
	tw, tws := "tw", 0
	var readyWorkspace func(t testing.TB) string
	readyWorkspace = func(t testing.TB) string {
		ws := stored(t, env, tw)
		b, err := env.Store.BuildByNumber(t.Context(), ws.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		switch st := b.Job.Status(); {
		case b.Transition == build.Delete && st == build.Succeeded:
			tws++
			tw = fmt.Sprintf("tw%d", tws)
			mustCall(t, env, admin, "POST", "/api/v1/workspaces", map[string]any{"name": tw, "template": "tf"}, http.StatusCreated, nil)
			return readyWorkspace(t)
		case st == build.Pending:
			mustCall(t, env, admin, "POST", "/api/v1/workspaces/"+tw+"/builds/latest/cancel", nil, http.StatusOK, nil)
		case st.Active():
			if err := svc.Finish(t.Context(), b.Job.ID, b.Job.WorkerID, build.Outcome{Error: "ended by the fuzz test"}); err != nil {
				t.Fatal(err)
			}
		}
		return tw
	}

	endpoints := []struct{ token, method, path string }{
		{agentToken, "POST", protocol.ReconcilePath},
		{admin, "POST", "/api/v1/workspaces"},
		{admin, "PATCH", "/api/v1/workspaces/w"},
		{admin, "POST", "/api/v1/agents"},
		{admin, "POST", "/api/v1/users"},
		{admin, "POST", "/api/v1/templates/ft/versions"},
		{admin, "POST", "/api/v1/workspaces/{tw}/builds"},
		{admin, "POST", "/api/v1/provisioners"},
		{prov.Token, "POST", protocol.ProvisionerAcquirePath},
		{prov.Token, "POST", protocol.ProvisionerHeartbeatPath},
		{prov.Token, "POST", protocol.ProvisionerLogsPath},
		{prov.Token, "POST", protocol.ProvisionerFinishPath},
		{admin, "PUT", "/api/v1/workspaces/{tw}/state"},
		{admin, "PATCH", "/api/v1/workspaces/{tw}"},
		{admin, "GET", "/api/v1/workspaces/{ref}"},
		{admin, "GET", "/api/v1/workspaces?all={all}"},
		{agentToken, "POST", protocol.ProxyExchangePath},
		{agentToken, "POST", protocol.ProxyCheckPath},
		{"", "POST", "/signin"},
		{"", "GET", protocol.ProxyAuthorizePath + "?{query}"},
		{admin, "POST", "/api/v1/users/{ref}/token"},
		{admin, "POST", "/api/v1/users/me/ssh-keys"},
		{agentToken, "POST", protocol.ProxySSHCheckPath},
		{agentToken, "POST", protocol.ProxyActivityPath},
		{admin, "DELETE", "/api/v1/users/me/ssh-keys/{ref}"},
		{admin, "POST", "/api/v1/workspaces/{tw}/update"},
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		e := endpoints[int(which)%len(endpoints)]
		path := e.path
		if strings.Contains(path, "{id}") {
			path = strings.Replace(path, "{id}", runningJob(t), 1)
		}
		if strings.Contains(path, "{tw}") {
			path = strings.Replace(path, "{tw}", readyWorkspace(t), 1)
		}
		if strings.HasSuffix(path, "/token") && (string(body) == "admin" || string(body) == "me") {
			body = []byte("fz-user") // keep the admin's token, which every other call uses
		}
		if strings.Contains(path, "{ref}") {
			path, body = strings.Replace(path, "{ref}", url.PathEscape(string(body)), 1), nil
		}
		list := strings.Contains(path, "{all}")
		if list {
			path, body = strings.Replace(path, "{all}", url.QueryEscape(string(body)), 1), nil
		}
		if html := e.path == "/signin" || strings.Contains(path, "{query}"); html {
			// The browser endpoints answer pages and redirects, never a 5xx, and redirect only to
			// this server or to a workspace host with a code.
			var req *http.Request
			var err error
			if e.method == "POST" {
				req, err = http.NewRequest("POST", env.URL+path, strings.NewReader(string(body)))
				if err == nil {
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				}
			} else {
				req, err = http.NewRequest("GET", env.URL+strings.Replace(path, "{query}", string(body), 1), nil)
			}
			if err != nil {
				return
			}
			resp, err := oaClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode >= 500 {
				t.Fatalf("%s %s answered %d to %q", e.method, path, resp.StatusCode, body)
			}
			if loc := resp.Header.Get("Location"); loc != "" && !server.SafeReturnPath(loc) && !strings.Contains(loc, "/.hangar/callback?code=") {
				t.Fatalf("%s %s redirected to %q on %q", e.method, path, loc, body)
			}
			return
		}
		var status int
		var out []byte
		if body == nil {
			status, out = call(t, env, e.token, e.method, path, nil)
		} else {
			status, out = call(t, env, e.token, e.method, path, body)
		}
		if status >= 500 {
			t.Fatalf("%s %s answered %d to %q: %s", e.method, path, status, body, out)
		}
		if status == http.StatusNoContent && len(out) == 0 {
			return
		}
		if list && status == http.StatusOK {
			var l []any
			if err := json.Unmarshal(out, &l); err != nil {
				t.Fatalf("GET %s answered a non-list %q", path, out)
			}
			return
		}
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("%s %s answered %d non-object %q to %q", e.method, path, status, out, body)
		}
	})
}
