package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/store"
)

// TestBadInputEveryRoute walks the server's route table (every endpoint, the one openapi.yaml
// documents) and sends each bad input: malformed JSON, a body over every limit, wrong types, huge
// numbers, bad path parameters and query values. Every answer must come at once (no hang), never be
// a 5xx, and, for an API endpoint, a refusal must be a 4xx with a JSON error that says what is wrong
// (code and message); nothing may be written by a refused request. On both stores.
func TestBadInputEveryRoute(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			te := newTFEnv(t, engine)
			env := te.Env
			agent := createAgent(t, env, "k1", nil)
			user := createUser(t, env, "dev")
			mustCall(t, env, user, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "agent": "k1"}, http.StatusCreated, nil)
			var tw sdk.Workspace
			mustCall(t, env, user, "POST", "/api/v1/workspaces", map[string]any{"name": "tw", "template": "tf"}, http.StatusCreated, &tw)
			// The helper endpoints that answer with a helper's token get one: an admin's would be
			// failed authentications, which the rate limit counts.
			helper := protocol.WorkspaceAgentTokenPrefix + "badinput"
			if err := env.Store.CreateWorkspaceAgentToken(context.Background(), store.WorkspaceAgentToken{Hash: tfbackend.HashAgentToken(helper),
				WorkspaceID: tw.ID, BuildNumber: 1, CreatedAt: env.Clock.Now()}); err != nil {
				t.Fatal(err)
			}
			tokenFor := func(path string) string {
				switch {
				case path == protocol.GitCredentialsPath, strings.HasPrefix(path, protocol.GitSSHKeyPath), path == protocol.DotfilesStatusPath, path == protocol.StartupStepPath:
					return helper
				case strings.HasPrefix(path, "/api/v1/agent/"), strings.HasPrefix(path, "/api/v1/proxy/"):
					return agent
				case strings.HasPrefix(path, "/api/v1/provisioner/"):
					return te.Prov
				}
				return env.AdminToken
			}
			before := badInputSnapshot(t, env)

			params := regexp.MustCompile(`\{[a-z_]+\}`)
			badParams := []string{"..", "%2e%2e", "a%2Fb%2Fc", "%00", "-1", "99999999999999999999", "1e9", "%C3%BC%C3%AF", strings.Repeat("x", 5000), "admin%2F"}
			const badQuery = "?timeout_seconds=1e999&after=-99999999999999999999&all=maybe&limit=1e999&follow=maybe&wait_seconds=x&before=%00&number=-1"
			// A JSON string that never ends, n bytes long: the decoder reads it to the route's limit.
			longBody := func(n int64) io.Reader {
				return io.MultiReader(strings.NewReader(`{"x":"`), &repeatReader{b: 'a', n: n})
			}
			bodies := []struct{ name, body string }{
				{"malformed JSON", `{"name": "x",`},
				{"trailing garbage", `{} {"x":1}`},
				{"array", `[1,2,3]`},
				{"string", `"text"`},
				{"huge number", `123456789012345678901234567890e999`},
				{"huge numbers in fields", `{"wait_seconds":1e30,"lifetime_seconds":1e400,"number":99999999999999999999,"workspaces_quota":1e20}`},
				{"wrong types in fields", `{"name":7,"desired_state":[],"transition":{},"config":"x","worker_id":1,"lines":"x","state":1,"public_key":[],"update_type":2,"workspace_agent_infos":{}}`},
				{"deep nesting", strings.Repeat("[", 100_000)},
				{"invalid UTF-8", "{\"name\":\"\xff\xfe\"}"},
			}

			var routes []sweepRoute
			for _, r := range env.Server.Routes() {
				routes = append(routes, sweepRoute{r.Method, r.Pattern})
			}
			sort.Slice(routes, func(i, j int) bool { return routes[i].pattern+routes[i].method < routes[j].pattern+routes[j].method })
			checked := 0
			statuses := map[int]int{}
			for _, r := range routes {
				fill := func(v string) string { return params.ReplaceAllString(r.pattern, v) }
				api := strings.HasPrefix(r.pattern, "/api/")
				send := func(what, path string, body io.Reader, mustRefuse bool) int {
					t.Helper()
					checked++
					// An answer must come within 10 s; a body of 86 MiB may take longer to read to the
					// limit (a minute under the race detector).
					limit := 10 * time.Second
					if strings.Contains(what, "largest limit") {
						limit = 3 * time.Minute
					}
					status, out, err := badInputCall(env, tokenFor(r.pattern), r.method, path, body, limit)
					statuses[status]++
					label := fmt.Sprintf("%s %s (%s)", r.method, r.pattern, what)
					switch {
					case err != nil:
						t.Errorf("%s: %v", label, err)
					case status >= 500:
						t.Errorf("%s: answered %d: %.300s", label, status, out)
					case status >= 400 && api:
						var e sdk.Error
						if json.Unmarshal(out, &e) != nil || e.Code == "" || e.Message == "" {
							t.Errorf("%s: answered %d without a JSON error: %.300s", label, status, out)
						}
					case mustRefuse && api:
						t.Errorf("%s: answered %d, want a refusal: %.300s", label, status, out)
					}
					return status
				}
				// Bad path parameters, every method.
				if params.MatchString(r.pattern) {
					for _, p := range badParams {
						var body io.Reader
						if r.method != "GET" && r.method != "DELETE" {
							body = strings.NewReader(`{}`)
						}
						send("path "+p[:min(len(p), 20)], fill(p), body, false)
					}
				}
				path := fill("w")
				if strings.Contains(r.pattern, "/workspaces/{name}/builds") || strings.Contains(r.pattern, "/state") {
					path = strings.Replace(fill("1"), "/workspaces/1/", "/workspaces/tw/", 1)
				} else if strings.HasPrefix(r.pattern, "/api/v1/templates/") {
					path = params.ReplaceAllString(r.pattern, "tf")
				}
				if r.method == "GET" {
					send("bad query", path+badQuery, nil, false)
					continue
				}
				for _, b := range bodies {
					send(b.name, path, strings.NewReader(b.body), true)
				}
				// Over the common limit; then, where that one was not the route's, over the largest
				// (once: the limit is checked before the store is read, and 86 MiB takes a while under
				// the race detector).
				if send("body over 1 MiB", path, longBody(sdk.MaxBodyBytes+1), true) != http.StatusRequestEntityTooLarge && engine == "sqlite" {
					send("body over the largest limit", path, longBody(protocol.MaxProvisionerBodyBytes+1), true)
				}
			}
			t.Logf("%d requests over %d routes; answers by status: %v", checked, len(routes), statuses)
			if checked < 500 {
				t.Fatalf("only %d requests sent over %d routes", checked, len(routes))
			}
			if after := badInputSnapshot(t, env); after != before {
				t.Errorf("refused requests wrote something:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

type sweepRoute struct{ method, pattern string }

// badInputCall sends one request and reads the answer's status and (up to 64 KiB of) body, or an
// error if no answer's headers come within limit (a hang). A 2xx stream (events, logs) is not read
// to its end.
func badInputCall(env *servertest.Env, token, method, path string, body io.Reader, limit time.Duration) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, env.URL+path, body)
	if err != nil {
		return 0, nil, fmt.Errorf("build the request: %w", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return 0, nil, fmt.Errorf("no answer (a hang?): %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 300 {
		return resp.StatusCode, nil, nil
	}
	out, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return resp.StatusCode, out, fmt.Errorf("read the answer: %w", err)
	}
	return resp.StatusCode, bytes.TrimSpace(out), nil
}

// badInputSnapshot is what requests could write, as one string: workspaces and their states,
// users, agents and their configs, templates, tw's builds, tokens, SSH keys, provisioners.
func badInputSnapshot(t *testing.T, env *servertest.Env) string {
	t.Helper()
	var b strings.Builder
	get := func(path string, v any) {
		mustCall(t, env, env.AdminToken, "GET", path, nil, http.StatusOK, v)
	}
	var ws []sdk.Workspace
	get("/api/v1/workspaces?all=true", &ws)
	for _, w := range ws {
		fmt.Fprintf(&b, "ws %s/%s %s %s %v;", w.Owner, w.Name, w.DesiredState, w.ActualState, w.Schedule)
	}
	var users []sdk.User
	get("/api/v1/users", &users)
	for _, u := range users {
		fmt.Fprintf(&b, "user %s %v %v;", u.Username, u.Admin, u.Suspended)
	}
	var agents []sdk.Agent
	get("/api/v1/agents", &agents)
	for _, a := range agents {
		fmt.Fprintf(&b, "agent %s %s;", a.Name, a.Config)
	}
	var tmpls []sdk.Template
	get("/api/v1/templates", &tmpls)
	for _, tm := range tmpls {
		fmt.Fprintf(&b, "template %s %d;", tm.Name, tm.ActiveVersion)
	}
	var builds []sdk.Build
	get("/api/v1/workspaces/dev%2Ftw/builds", &builds)
	for _, bd := range builds {
		fmt.Fprintf(&b, "build %d %s %s;", bd.Number, bd.Transition, bd.Status)
	}
	var toks []sdk.Token
	get("/api/v1/tokens", &toks)
	for _, tk := range toks {
		fmt.Fprintf(&b, "token %s %v;", tk.Name, tk.RevokedAt)
	}
	var keys struct {
		Keys []sdk.SSHKey `json:"ssh_keys"`
	}
	get("/api/v1/users/me/ssh-keys", &keys)
	fmt.Fprintf(&b, "keys %d;", len(keys.Keys))
	var provs []sdk.Provisioner
	get("/api/v1/provisioners", &provs)
	for _, p := range provs {
		fmt.Fprintf(&b, "provisioner %s;", p.Name)
	}
	return b.String()
}
