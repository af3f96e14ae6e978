package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// loadOpenAPI loads and validates the embedded document (examples and defaults included).
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(server.OpenAPI)
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	if err := doc.Validate(t.Context(), openapi3.EnableExamplesValidation(), openapi3.EnableSchemaDefaultsValidation()); err != nil {
		t.Fatalf("openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	return doc
}

func TestOpenAPIDocumentValid(t *testing.T) {
	doc := loadOpenAPI(t)
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi = %q, want 3.0.3", doc.OpenAPI)
	}
	for _, name := range []string{"userToken", "agentToken", "provisionerToken"} {
		s := doc.Components.SecuritySchemes[name]
		if s == nil || s.Value.Type != "http" || s.Value.Scheme != "bearer" {
			t.Errorf("security scheme %s missing or not http bearer", name)
		}
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if strings.TrimSpace(op.Description) == "" {
				t.Errorf("%s %s has no description", method, path)
			}
			if op.Security == nil {
				t.Errorf("%s %s does not say its security (security: [] for none)", method, path)
			}
		}
	}
}

// TestOpenAPIRoutes checks that the document and the server's route table list the same endpoints.
func TestOpenAPIRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	env := servertest.New(t)

	served := map[string]bool{}
	for _, r := range env.Server.Routes() {
		served[r.Method+" "+r.Pattern] = true
	}
	if len(served) == 0 {
		t.Fatal("the server lists no routes")
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	for r := range served {
		if !documented[r] {
			t.Errorf("route %s is served but not in openapi.yaml", r)
		}
	}
	for r := range documented {
		if !served[r] {
			t.Errorf("openapi.yaml documents %s, which the server does not serve", r)
		}
	}
}

func init() {
	openapi3filter.RegisterBodyDecoder("application/x-ndjson", decodeNDJSON)
}

// decodeNDJSON decodes an NDJSON body (a build log) as the array of its lines, which the document
// describes: each line must be exactly one JSON value.
func decodeNDJSON(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	out := []any{}
	if len(data) == 0 {
		return out, nil
	}
	if !bytes.HasSuffix(data, []byte("\n")) {
		return nil, errors.New("NDJSON: the last line does not end with a newline")
	}
	for i, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			return nil, fmt.Errorf("NDJSON line %d: %w", i+1, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// oaBody is a request body sent as is, with its content type.
type oaBody struct {
	contentType string
	data        []byte
}

// oaChecker sends requests to a running server and validates each request and response against the
// document.
type oaChecker struct {
	t      *testing.T
	env    *servertest.Env
	router routers.Router
	// answered holds "METHOD path status" of every validated response.
	answered map[string]bool
	// cookie, when set, is sent as the Cookie header (the browser endpoints).
	cookie string
	// lastHeader is the last response's header.
	lastHeader http.Header
}

func init() {
	// The browser endpoints answer HTML pages: checked as strings.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.FileBodyDecoder)
}

// oaClient does not follow redirects: the browser endpoints' redirects are what is checked.
var oaClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func newOAChecker(t *testing.T, env *servertest.Env) *oaChecker {
	t.Helper()
	doc := loadOpenAPI(t)
	doc.Servers = openapi3.Servers{{URL: env.URL}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("router: %v", err)
	}
	return &oaChecker{t: t, env: env, router: router, answered: map[string]bool{}}
}

// oaAuthenticate accepts a request for a security scheme only with a token of that kind, so that a
// wrong scheme in the document fails the test.
func oaAuthenticate(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	token, ok := strings.CutPrefix(in.RequestValidationInput.Request.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return errors.New("no bearer token")
	}
	prefix := map[string]string{"userToken": "hgu_", "agentToken": "hga_", "provisionerToken": "hgp_", "workspaceAgentToken": "hwa_"}[in.SecuritySchemeName]
	if prefix == "" || !strings.HasPrefix(token, prefix) {
		return fmt.Errorf("scheme %s does not take token %.8s...", in.SecuritySchemeName, token)
	}
	return nil
}

func (c *oaChecker) options() *openapi3filter.Options {
	return &openapi3filter.Options{
		AuthenticationFunc:                oaAuthenticate,
		IncludeResponseStatus:             true,
		RejectWhenRequestBodyNotSpecified: true,
		MultiError:                        true,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{
			openapi3.WithStringFormatValidator("uuid", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC4122)),
		},
	}
}

func (c *oaChecker) newRequest(token, method, path string, body any) *http.Request {
	c.t.Helper()
	var data []byte
	contentType := "application/json"
	switch b := body.(type) {
	case nil:
	case oaBody:
		data, contentType = b.data, b.contentType
	case string:
		data = []byte(b)
	default:
		var err error
		if data, err = json.Marshal(b); err != nil {
			c.t.Fatal(err)
		}
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.env.URL+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.cookie != "" {
		req.Header.Set("Cookie", c.cookie)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	return req
}

// do sends a request, checks the status, and validates the request and the response against the
// document. docAccepts says whether the document must accept the request (false for requests that
// break it, which the server must refuse too). It returns the response body.
func (c *oaChecker) do(token, method, path string, body any, want int, docAccepts bool) []byte {
	c.t.Helper()
	ctx := c.t.Context()
	what := method + " " + path

	req := c.newRequest(token, method, path, body)
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		c.t.Fatalf("%s: not in the document: %v", what, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: c.options()}
	err = openapi3filter.ValidateRequest(ctx, in)
	switch {
	case docAccepts && err != nil:
		c.t.Errorf("%s: the document refuses the request: %v", what, err)
	case !docAccepts && err == nil:
		c.t.Errorf("%s: the document accepts a request the server refuses with %d", what, want)
	}

	resp, err := oaClient.Do(c.newRequest(token, method, path, body))
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	c.lastHeader = resp.Header
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != want {
		c.t.Fatalf("%s: status %d, want %d; body %s", what, resp.StatusCode, want, data)
	}
	err = openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(data)),
		Options:                c.options(),
	})
	if err != nil {
		c.t.Errorf("%s: response %d does not match the document: %v\nbody: %s", what, resp.StatusCode, err, data)
	}
	c.answered[fmt.Sprintf("%s %s %d", method, route.Path, resp.StatusCode)] = true
	return data
}

// events opens GET /api/v1/workspaces/events, validates the request, the status and the first
// event (a snapshot of want workspaces) against the document's WorkspaceEvents, and closes it: a
// stream never ends, so do cannot read it whole.
func (c *oaChecker) events(token string, want int) {
	c.t.Helper()
	const path = "/api/v1/workspaces/events"
	req := c.newRequest(token, "GET", path, nil)
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		c.t.Fatalf("GET %s: not in the document: %v", path, err)
	}
	if err := openapi3filter.ValidateRequest(c.t.Context(), &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: c.options()}); err != nil {
		c.t.Errorf("GET %s: the document refuses the request: %v", path, err)
	}
	ctx, cancel := context.WithCancel(c.t.Context())
	defer cancel()
	resp, err := oaClient.Do(req.WithContext(ctx))
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, ok := route.Operation.Responses.Value(strconv.Itoa(resp.StatusCode)).Value.Content["text/event-stream"]; !ok || resp.StatusCode != 200 ||
		resp.Header.Get("Content-Type") != "text/event-stream" {
		c.t.Fatalf("GET %s: %d %s, not a documented event stream", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			c.t.Fatalf("GET %s: event data %s: %v", path, data, err)
		}
		schema := route.Spec.Components.Schemas["WorkspaceEvents"].Value
		if err := schema.VisitJSON(v); err != nil {
			c.t.Errorf("GET %s: the %s event does not match WorkspaceEvents: %v\n%s", path, event, err, data)
		}
		var ev server.WorkspaceEvents
		if err := json.Unmarshal([]byte(data), &ev); err != nil || event != "snapshot" || len(ev.Workspaces) != want {
			c.t.Errorf("GET %s: first event %s with %d workspaces (%v), want a snapshot of %d", path, event, len(ev.Workspaces), err, want)
		}
		c.answered["GET "+route.Path+" 200"] = true
		return
	}
	c.t.Fatalf("GET %s: the stream ended without an event: %v", path, sc.Err())
}

func (c *oaChecker) decode(data []byte, out any) {
	c.t.Helper()
	if err := json.Unmarshal(data, out); err != nil {
		c.t.Fatalf("decode %s: %v", data, err)
	}
}

// TestOpenAPIMatchesResponses sends real requests to a running server and validates every request and
// response against the document.
func TestOpenAPIMatchesResponses(t *testing.T) {
	timers := newFakeTimers()
	idp := newOIDCProvider(t)
	var base string
	env := servertest.NewWith(t, "sqlite", timers.option, withOIDC(idp), withForge(t, idp, &base), withGitSSH(t))
	base = env.URL
	registerOIDCClient(env, idp)
	c := newOAChecker(t, env)
	admin := env.AdminToken
	oaOIDC(t, c, idp)

	// Operations.
	c.do("", "GET", "/healthz", nil, 200, true)
	c.do("", "GET", "/readyz", nil, 200, true)
	if m := c.do("", "GET", "/metrics", nil, 200, true); !bytes.Contains(m, []byte("hangar_reconcile_orphans_total")) {
		t.Errorf("metrics lack hangar_reconcile_orphans_total:\n%s", m)
	}
	if d := c.do("", "GET", "/api/v1/openapi.yaml", nil, 200, true); !bytes.Equal(d, server.OpenAPI) {
		t.Error("GET /api/v1/openapi.yaml does not serve the embedded document")
	}

	// Users.
	c.do(admin, "GET", "/api/v1/users/me", nil, 200, true)
	c.do("", "GET", "/api/v1/users/me", nil, 401, false)
	c.do(admin, "PATCH", "/api/v1/users/me", map[string]any{"full_name": "Ada Lovelace", "email": "ada@example.com", "dotfiles_repo": "git@git.example.com:ada/dots.git#main"}, 200, true)
	c.do(admin, "PATCH", "/api/v1/users/me", map[string]any{"dotfiles_repo": "file:///etc"}, 400, true)
	c.do("", "PATCH", "/api/v1/users/me", map[string]any{"full_name": "x"}, 401, false)
	var dev sdk.User
	c.decode(c.do(admin, "POST", "/api/v1/users", map[string]any{"username": "dev"}, 201, true), &dev)
	if !strings.HasPrefix(dev.Token, "hgu_") {
		t.Fatalf("user token %q", dev.Token)
	}
	c.do(admin, "POST", "/api/v1/users", map[string]any{"username": "dev"}, 409, true)
	c.do(admin, "POST", "/api/v1/users", map[string]any{"username": "Dev!"}, 400, false)
	c.do(dev.Token, "POST", "/api/v1/users", map[string]any{"username": "eve", "admin": true}, 403, true)
	big := `{"username":"` + strings.Repeat("a", sdk.MaxBodyBytes) + `"}`
	c.do(admin, "POST", "/api/v1/users", big, 413, false)
	c.do(admin, "POST", "/api/v1/users", map[string]any{"username": "rot"}, 201, true)
	var rotated sdk.User
	c.decode(c.do(admin, "POST", "/api/v1/users/rot/token", nil, 200, true), &rotated)
	c.do(rotated.Token, "POST", "/api/v1/users/me/token", nil, 200, true)
	c.do(rotated.Token, "POST", "/api/v1/users/rot/token", nil, 401, true) // its token changed
	c.do(dev.Token, "POST", "/api/v1/users/admin/token", nil, 403, true)
	c.do(admin, "POST", "/api/v1/users/nobody/token", nil, 404, true)

	// Agents.
	var agent sdk.Agent
	c.decode(c.do(admin, "POST", "/api/v1/agents", map[string]any{
		"name": "k1",
		"config": map[string]any{
			"dns_zone":                  "workspaces.example.com",
			"workspaces_per_user_quota": 2,
			"image_pull_secrets":        []map[string]string{{"name": "regcred", "namespace": "registry"}},
			"labels":                    map[string]string{"team": "dev"},
			"max_resources_per_workspace": map[string]any{
				"limits": map[string]string{"cpu": "4", "memory": "8Gi"},
			},
		},
	}, 201, true), &agent)
	if !strings.HasPrefix(agent.Token, "hga_") {
		t.Fatalf("agent token %q", agent.Token)
	}
	c.do(admin, "POST", "/api/v1/agents", map[string]any{"name": "k2"}, 201, true)
	c.do(admin, "POST", "/api/v1/agents", map[string]any{"name": "k1"}, 409, true)
	c.do(admin, "POST", "/api/v1/agents", map[string]any{"name": "k3", "config": map[string]any{"bogus": 1}}, 400, false)
	c.do(dev.Token, "POST", "/api/v1/agents", map[string]any{"name": "k4"}, 403, true)
	c.do(dev.Token, "GET", "/api/v1/agents", nil, 200, true)

	// Workspaces.
	c.do(dev.Token, "POST", "/api/v1/workspaces", map[string]any{"name": "my-ws", "agent": "k1"}, 201, true)
	c.do(dev.Token, "POST", "/api/v1/workspaces", map[string]any{"name": "other", "agent": "k1"}, 201, true)
	c.do(dev.Token, "POST", "/api/v1/workspaces", map[string]any{"name": "third", "agent": "k1"}, 409, true) // quota
	c.do(admin, "POST", "/api/v1/workspaces", map[string]any{"name": "my-ws", "agent": "k2"}, 201, true)     // names are per owner
	c.events(dev.Token, 2)
	c.do(admin, "POST", "/api/v1/workspaces", map[string]any{"name": "my-ws", "agent": "k2"}, 409, true) // name taken
	c.do(dev.Token, "POST", "/api/v1/workspaces", map[string]any{"name": "My_WS", "agent": "k1"}, 400, false)
	c.do(dev.Token, "POST", "/api/v1/workspaces", map[string]any{"name": "ws", "agent": "nope"}, 400, true)
	c.do(dev.Token, "POST", "/api/v1/workspaces", oaBody{"text/plain", []byte(`{"name":"ws","agent":"k1"}`)}, 415, false)
	c.do(agent.Token, "POST", "/api/v1/workspaces", map[string]any{"name": "ws", "agent": "k1"}, 401, false)
	c.do(dev.Token, "GET", "/api/v1/workspaces/my-ws", nil, 200, true)
	c.do(dev.Token, "GET", "/api/v1/workspaces/nope", nil, 404, true)
	c.do(dev.Token, "GET", "/api/v1/workspaces", nil, 200, true)

	// Reconcile: the first answer carries the config, then the agent reports a running Deployment,
	// an error on the other workspace, and an orphan.
	var resp protocol.ReconcileResponse
	var info protocol.AgentInfo
	c.decode(c.do(agent.Token, "GET", protocol.InfoPath, nil, 200, true), &info)
	if info.Name != "k1" || info.ID == "" || info.Settings.PartialReconciliationIntervalSeconds == 0 {
		t.Errorf("agent info %+v", info)
	}
	c.do(dev.Token, "GET", protocol.InfoPath, nil, 401, false)
	var waited protocol.WaitResponse
	c.decode(c.do(agent.Token, "GET", protocol.WaitPath+"?timeout_seconds=5", nil, 200, true), &waited)
	if !waited.Pending {
		t.Errorf("wait with unanswered workspaces: %+v", waited)
	}
	c.do(agent.Token, "GET", protocol.WaitPath+"?timeout_seconds=600", nil, 400, false)
	c.decode(c.do(agent.Token, "POST", protocol.ReconcilePath, protocol.ReconcileRequest{
		UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{},
	}, 200, true), &resp)
	if len(resp.WorkspaceRailsInfos) != 2 || resp.WorkspaceRailsInfos[0].ConfigToApply == "" {
		t.Fatalf("first reconcile answered %+v", resp)
	}
	// The agent names workspaces by cluster name and namespace.
	var mine, other sdk.Workspace
	stepAt := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	c.decode(c.do(dev.Token, "GET", "/api/v1/workspaces/my-ws", nil, 200, true), &mine)
	c.decode(c.do(admin, "GET", "/api/v1/workspaces/"+url.PathEscape(dev.Username+"/other"), nil, 200, true), &other)
	c.decode(c.do(agent.Token, "POST", protocol.ReconcilePath, protocol.ReconcileRequest{
		UpdateType: protocol.UpdateFull,
		WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{
			{Name: mine.KubeName, Namespace: mine.Namespace, LatestK8sDeploymentInfo: deploymentIn("Running", 5), StartupSteps: []protocol.StartupStep{
				{Name: protocol.StepImagePrepare, State: protocol.StepDone, StartedAt: &stepAt, EndedAt: &stepAt, Detail: "image r:1 is built already (cached)", Log: "image r:1 is built already (cached)\n"},
				{Name: protocol.StepImageBuild, State: protocol.StepPending}}},
			{Name: other.KubeName, Namespace: other.Namespace, ErrorDetails: &protocol.ErrorDetails{ErrorType: protocol.ErrorTypeApplier, ErrorMessage: "quota exceeded"}},
			{Name: "ghost", Namespace: "hangar-ghost", LatestK8sDeploymentInfo: deploymentIn("Stopped", 9)},
		},
	}, 200, true), &resp)
	if n := len(resp.WorkspaceRailsInfos); n != 3 || resp.WorkspaceRailsInfos[2].DesiredState != "Terminated" {
		t.Errorf("full reconcile answered %+v, want my-ws, other and the orphan ghost Terminated", resp)
	}
	// A whole Deployment is accepted; extra fields are ignored.
	c.do(agent.Token, "POST", protocol.ReconcilePath, `{"update_type":"partial","workspace_agent_infos":[{"name":"`+mine.KubeName+`","namespace":"`+mine.Namespace+`",
		"latest_k8s_deployment_info":{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"my-ws","resourceVersion":"6","labels":{"a":"b"}},
		"spec":{"replicas":1,"template":{}},"status":{"replicas":1,"readyReplicas":1,"availableReplicas":1,"updatedReplicas":1,"conditions":[
		{"type":"Available","status":"True","reason":"MinimumReplicasAvailable","lastUpdateTime":"2026-01-01T05:00:00Z"},
		{"type":"Progressing","status":"True","reason":"NewReplicaSetAvailable"}]}}}]}`, 200, true)
	c.do(agent.Token, "POST", protocol.ReconcilePath, map[string]any{"update_type": "sometimes", "workspace_agent_infos": []any{}}, 400, false)
	// A newer agent's extra fields are ignored (tolerant reader).
	c.do(agent.Token, "POST", protocol.ReconcilePath, map[string]any{"update_type": "partial", "workspace_agent_infos": []any{}, "extra": 1}, 200, true)
	c.do(dev.Token, "POST", protocol.ReconcilePath, map[string]any{"update_type": "full", "workspace_agent_infos": []any{}}, 401, false)
	c.do(agent.Token, "POST", protocol.ReconcilePath, oaBody{"application/xml", []byte("<x/>")}, 415, false)
	// Everything answered: a wait blocks until its timeout, which the test fires.
	go func() {
		select {
		case <-timers.started:
			timers.fire <- time.Now()
		case <-t.Context().Done():
		}
	}()
	c.decode(c.do(agent.Token, "GET", protocol.WaitPath, nil, 200, true), &waited)
	if waited.Pending {
		t.Errorf("wait with everything answered: %+v", waited)
	}

	var ws sdk.Workspace
	c.decode(c.do(dev.Token, "GET", "/api/v1/workspaces/my-ws", nil, 200, true), &ws)
	if ws.ActualState != "Running" || ws.DeploymentResourceVersion == nil || ws.RespondedToAgentAt == nil {
		t.Errorf("my-ws after reconcile: %+v", ws)
	}
	// Reported pending, and the workspace runs: the step was skipped.
	if len(ws.StartupSteps) != 2 || ws.StartupSteps[0].Detail != "image r:1 is built already (cached)" || ws.StartupSteps[1].State != "skipped" {
		t.Errorf("my-ws's startup steps: %+v", ws.StartupSteps)
	}
	c.decode(c.do(dev.Token, "GET", "/api/v1/workspaces/other", nil, 200, true), &ws)
	if ws.Error == nil {
		t.Errorf("other after an applier error: %+v, want an error", ws)
	}
	c.do(admin, "GET", "/api/v1/workspaces", nil, 200, true)
	c.do(admin, "GET", "/api/v1/workspaces?all=true", nil, 200, true)
	c.do(admin, "GET", "/api/v1/workspaces?all=yes", nil, 400, false)
	c.do(dev.Token, "GET", "/api/v1/workspaces/a%2Fb%2Fc", nil, 400, false)

	oaProxy(t, c, dev.Token, agent.Token, mine.URL)
	oaSSH(t, c, dev.Token, agent.Token, mine)

	// Desired state changes.
	c.do(dev.Token, "PATCH", "/api/v1/workspaces/my-ws", map[string]any{"desired_state": "RestartRequested"}, 200, true)
	c.do(dev.Token, "PATCH", "/api/v1/workspaces/my-ws", map[string]any{"desired_state": "Stopped"}, 200, true)
	c.do(dev.Token, "PATCH", "/api/v1/workspaces/my-ws", map[string]any{"desired_state": "RestartRequested"}, 409, true)
	c.do(dev.Token, "PATCH", "/api/v1/workspaces/my-ws", map[string]any{"desired_state": "Sleeping"}, 400, false)
	c.do(dev.Token, "PATCH", "/api/v1/workspaces/nope", map[string]any{"desired_state": "Stopped"}, 404, true)
	var sched sdk.Workspace
	c.decode(c.do(dev.Token, "PUT", "/api/v1/workspaces/my-ws/schedule", map[string]any{"autostart": "0 9 * * 1-5", "timezone": "Europe/Paris", "ttl": "8h"}, 200, true), &sched)
	if sched.Schedule.Autostart != "0 9 * * 1-5" || sched.Schedule.TTL == nil || *sched.Schedule.TTL != "8h0m0s" || sched.Automation == nil ||
		sched.Automation.TTL != "8h0m0s" || sched.Automation.Policy.MaxActive != "36h0m0s" {
		t.Errorf("schedule set: %+v %+v", sched.Schedule, sched.Automation)
	}
	c.do(dev.Token, "PUT", "/api/v1/workspaces/my-ws/schedule", map[string]any{"autostart": "0 9 * *", "timezone": ""}, 400, true)
	c.do(dev.Token, "PUT", "/api/v1/workspaces/my-ws/schedule", map[string]any{"autostart": "", "timezone": "", "ttl": "soon"}, 400, false)
	c.do(dev.Token, "PUT", "/api/v1/workspaces/nope/schedule", map[string]any{"autostart": "", "timezone": ""}, 404, true)
	c.do(dev.Token, "PATCH", "/api/v1/workspaces/my-ws", map[string]any{"desired_state": "Terminated"}, 200, true)
	c.do(dev.Token, "PATCH", "/api/v1/workspaces/my-ws", map[string]any{"desired_state": "Running"}, 409, true)
	c.do(dev.Token, "PATCH", "/api/v1/workspaces/my-ws", oaBody{"application/json", nil}, 400, false)

	oaTerraformBackend(t, c, dev.Token)
	oaWorkspaceAgent(t, c, dev.Token)
	oaExternalAuth(t, c, idp, dev.Token)
	oaGitSSH(t, c, dev.Token)
	oaDotfiles(t, c, dev.Token)
	oaStartupStep(t, c, dev.Token)
	oaMetadata(t, c, dev.Token)
	oaTokensAndUsers(t, c, dev.Token)

	// The audit log of all the above (admins).
	var page sdk.AuditPage
	c.decode(c.do(admin, "GET", "/api/v1/audit?limit=5", nil, 200, true), &page)
	if len(page.Entries) != 5 || page.NextBeforeID == 0 {
		t.Errorf("the audit log's first page: %+v", page)
	}
	c.do(admin, "GET", "/api/v1/audit?actor=dev&action=workspace.transition&outcome=failure&target=my-ws&target_kind=workspace&since=2026-01-01T00:00:00Z", nil, 200, true)
	c.do(admin, "GET", "/api/v1/audit?limit=0", nil, 400, false)
	c.do(dev.Token, "GET", "/api/v1/audit", nil, 403, true)

	// Every operation of the document was seen succeeding.
	doc := loadOpenAPI(t)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			ok := false
			for status := range op.Responses.Map() {
				// The browser endpoints succeed with redirects.
				// The WebSocket endpoints succeed with 101.
				if (strings.HasPrefix(status, "2") || strings.HasPrefix(status, "3") || status == "101") && c.answered[method+" "+path+" "+status] {
					ok = true
				}
			}
			if !ok {
				t.Errorf("no successful %s %s was validated", method, path)
			}
		}
	}

	// Paths under /api/ that the document lacks are 404 with an Error body, as the document says.
	for _, r := range []struct{ method, path string }{{"GET", "/api/v1/nothing"}, {"DELETE", "/api/v1/workspaces/other"}, {"PUT", "/api/v1/users"}} {
		req := c.newRequest(dev.Token, r.method, r.path, nil)
		if _, _, err := c.router.FindRoute(req); err == nil {
			t.Errorf("%s %s is in the document", r.method, r.path)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e sdk.Error
		if resp.StatusCode != 404 || json.Unmarshal(data, &e) != nil || e.Message == "" {
			t.Errorf("%s %s: %d %s, want 404 with an error body", r.method, r.path, resp.StatusCode, data)
		}
	}
	if keys := sortedKeys(c.answered); testing.Verbose() {
		t.Logf("validated: %s", strings.Join(keys, ", "))
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// oaTerraformBackend validates the Terraform backend's endpoints: templates, builds, logs, state,
// provisioners and the provisioner protocol, the test playing the provisioner. dev is a user token;
// dev owns the kubernetes workspace "other".
func oaTerraformBackend(t *testing.T, c *oaChecker, dev string) {
	admin := c.env.AdminToken
	jobPath := func(path, id string) string { return strings.Replace(path, "{id}", id, 1) }

	// Templates.
	archive := tfModule(t)
	var tmpl sdk.Template
	c.decode(c.do(admin, "POST", "/api/v1/templates/tf/versions", map[string]any{"kind": "terraform", "archive": archive}, 201, true), &tmpl)
	if tmpl.Kind != "terraform" || len(tmpl.Versions) != 1 || len(tmpl.Versions[0].Variables) != 1 {
		t.Fatalf("pushed template %+v", tmpl)
	}
	c.do(admin, "POST", "/api/v1/templates/tf/versions", map[string]any{"kind": "terraform", "archive": archive}, 201, true)
	devfile := "schemaVersion: 2.2.0\ncomponents:\n- name: main\n  container:\n    image: alpine\n"
	c.do(admin, "POST", "/api/v1/templates/kube/versions", map[string]any{"kind": "kubernetes", "devfile": devfile}, 201, true)
	c.do(admin, "POST", "/api/v1/templates/tf/versions", map[string]any{"kind": "kubernetes", "devfile": devfile}, 409, true)
	c.do(admin, "POST", "/api/v1/templates/t2/versions", map[string]any{"kind": "terraform", "archive": []byte("not a tar")}, 400, true)
	c.do(admin, "POST", "/api/v1/templates/t2/versions", map[string]any{"kind": "terraform"}, 400, true)
	c.do(admin, "POST", "/api/v1/templates/t2/versions", map[string]any{"kind": "helm"}, 400, false)
	c.do(admin, "POST", "/api/v1/templates/t2/versions", map[string]any{"kind": "terraform", "archive": archive, "extra": 1}, 400, false)
	c.do(admin, "POST", "/api/v1/templates/t2/versions", oaBody{"text/plain", []byte(`{"kind":"terraform"}`)}, 415, false)
	c.do(dev, "POST", "/api/v1/templates/t2/versions", map[string]any{"kind": "terraform", "archive": archive}, 403, true)
	c.do("", "POST", "/api/v1/templates/t2/versions", map[string]any{"kind": "terraform", "archive": archive}, 401, false)
	var ts []sdk.Template
	c.decode(c.do(dev, "GET", "/api/v1/templates", nil, 200, true), &ts)
	if len(ts) != 2 {
		t.Errorf("templates %+v", ts)
	}
	c.decode(c.do(dev, "GET", "/api/v1/templates/tf", nil, 200, true), &tmpl)
	if tmpl.ActiveVersion != 2 || len(tmpl.Versions) != 2 || tmpl.Versions[0].Number != 2 {
		t.Errorf("template tf %+v", tmpl)
	}
	c.do(dev, "GET", "/api/v1/templates/nope", nil, 404, true)
	c.decode(c.do(admin, "PUT", "/api/v1/templates/tf/lifecycle", map[string]any{"default_ttl": "8h", "failure_ttl": "1h"}, 200, true), &tmpl)
	if tmpl.Lifecycle.DefaultTTL != "8h0m0s" || tmpl.Lifecycle.FailureTTL != "1h0m0s" {
		t.Errorf("template lifecycle %+v", tmpl.Lifecycle)
	}
	c.do(admin, "PUT", "/api/v1/templates/tf/lifecycle", map[string]any{"default_ttl": "1s"}, 400, true)
	c.do(dev, "PUT", "/api/v1/templates/tf/lifecycle", map[string]any{"default_ttl": "8h"}, 403, true)
	c.do(admin, "PUT", "/api/v1/templates/nope/lifecycle", map[string]any{}, 404, true)
	c.do(dev, "GET", "/api/v1/templates/tf/versions", nil, 200, true)
	c.do(dev, "GET", "/api/v1/templates/nope/versions", nil, 404, true)
	c.do(admin, "POST", "/api/v1/templates/tf/versions", map[string]any{"kind": "terraform", "archive": archive, "activate": false}, 201, true)
	c.do(admin, "POST", "/api/v1/templates/tf/versions/2/promote", nil, 200, true)
	c.do(admin, "POST", "/api/v1/templates/tf/versions/first/promote", nil, 400, true)
	c.do(admin, "POST", "/api/v1/templates/tf/versions/9/promote", nil, 404, true)
	c.do(dev, "POST", "/api/v1/templates/tf/versions/2/promote", nil, 403, true)
	c.do(admin, "GET", "/api/v1/templates/tf/versions/2/archive", nil, 200, true)
	c.do(admin, "GET", "/api/v1/templates/kube/versions/active/archive", nil, 200, true)
	c.do(admin, "GET", "/api/v1/templates/tf/versions/9/archive", nil, 404, true)
	c.do(dev, "GET", "/api/v1/templates/tf/versions/2/archive", nil, 403, true)

	// Presets (pools of prebuilt workspaces).
	var preset sdk.Preset
	c.decode(c.do(admin, "PUT", "/api/v1/templates/tf/presets/small", map[string]any{"instances": 2,
		"schedule": []map[string]any{{"cron": "* 8-18 * * 1-5", "instances": 3}}, "timezone": "Europe/Paris"}, 200, true), &preset)
	if preset.Name != "small" || preset.Instances != 2 || preset.Pool.Version != 2 || len(preset.Schedule) != 1 || preset.Pool.Ready != 0 {
		t.Errorf("preset %+v", preset)
	}
	c.do(admin, "PUT", "/api/v1/templates/tf/presets/small", map[string]any{"instances": 101, "parameters": map[string]string{"nope": "x"}}, 400, false)
	c.do(admin, "PUT", "/api/v1/templates/tf/presets/Bad_Name", map[string]any{"instances": 1}, 400, true)
	c.do(dev, "PUT", "/api/v1/templates/tf/presets/small", map[string]any{"instances": 1}, 403, true)
	c.do(admin, "PUT", "/api/v1/templates/nope/presets/small", map[string]any{"instances": 1}, 404, true)
	var presets []sdk.Preset
	c.decode(c.do(dev, "GET", "/api/v1/templates/tf/presets", nil, 200, true), &presets)
	if len(presets) != 1 || presets[0].Name != "small" {
		t.Errorf("presets %+v", presets)
	}
	c.do(dev, "GET", "/api/v1/workspaces?prebuilds=true", nil, 403, true)
	c.do(admin, "GET", "/api/v1/workspaces?prebuilds=true", nil, 200, true)
	c.do(dev, "DELETE", "/api/v1/templates/tf/presets/small", nil, 403, true)
	c.do(admin, "DELETE", "/api/v1/templates/tf/presets/small", nil, 204, true)
	c.do(admin, "DELETE", "/api/v1/templates/tf/presets/small", nil, 404, true)
	c.do(admin, "POST", "/api/v1/templates/gone/versions", map[string]any{"kind": "terraform", "archive": archive}, 201, true)
	c.do(admin, "PUT", "/api/v1/templates/gone/presets/p", map[string]any{"instances": 0}, 200, true)
	c.do(dev, "DELETE", "/api/v1/templates/gone", nil, 403, true)
	c.do(admin, "DELETE", "/api/v1/templates/gone", nil, 409, true)
	c.do(admin, "DELETE", "/api/v1/templates/gone/presets/p", nil, 204, true)
	c.do(admin, "DELETE", "/api/v1/templates/gone", nil, 204, true)
	c.do(admin, "DELETE", "/api/v1/templates/gone", nil, 404, true)

	// Provisioners.
	var prov sdk.Provisioner
	c.decode(c.do(admin, "POST", "/api/v1/provisioners", map[string]any{"name": "p1"}, 201, true), &prov)
	if !strings.HasPrefix(prov.Token, "hgp_") || prov.LastSeenAt != nil {
		t.Fatalf("provisioner %+v", prov)
	}
	p := prov.Token
	c.do(admin, "POST", "/api/v1/provisioners", map[string]any{"name": "p1"}, 409, true)
	c.do(admin, "POST", "/api/v1/provisioners", map[string]any{"name": "P 1"}, 400, false)
	c.do(admin, "POST", "/api/v1/provisioners", `{"name":"`+strings.Repeat("p", sdk.MaxBodyBytes)+`"}`, 413, false)
	c.do(admin, "POST", "/api/v1/provisioners", oaBody{"text/plain", []byte(`{"name":"p2"}`)}, 415, false)
	c.do(dev, "POST", "/api/v1/provisioners", map[string]any{"name": "p2"}, 403, true)
	c.do(dev, "GET", "/api/v1/provisioners", nil, 403, true)

	// A terraform workspace, and its first build run by the test as the provisioner.
	var ws sdk.Workspace
	c.decode(c.do(dev, "POST", "/api/v1/workspaces", map[string]any{"name": "tfw", "template": "tf"}, 201, true), &ws)
	if ws.Backend != "terraform" || ws.ActualState != "Starting" {
		t.Fatalf("terraform workspace %+v", ws)
	}
	c.do(dev, "POST", "/api/v1/workspaces", map[string]any{"name": "x", "template": "nope"}, 400, true)
	c.do(dev, "POST", "/api/v1/workspaces", map[string]any{"name": "x", "template": "tf", "agent": "k1"}, 400, true)
	c.do(dev, "PATCH", "/api/v1/workspaces/tfw", map[string]any{"desired_state": "Running"}, 200, true)
	c.do(dev, "PATCH", "/api/v1/workspaces/tfw", map[string]any{"desired_state": "Stopped"}, 409, true)
	var acq protocol.AcquireResponse
	c.decode(c.do(p, "POST", protocol.ProvisionerAcquirePath, map[string]any{"worker_id": "h1", "wait_seconds": 0}, 200, true), &acq)
	if acq.Job == nil || acq.Job.WorkspaceName != "tfw" {
		t.Fatalf("acquire %+v", acq)
	}
	job := acq.Job.ID
	c.decode(c.do(p, "POST", protocol.ProvisionerAcquirePath, map[string]any{"worker_id": "h2"}, 200, true), &acq)
	if acq.Job != nil {
		t.Fatalf("second acquire %+v", acq.Job)
	}
	c.do(p, "POST", protocol.ProvisionerAcquirePath, map[string]any{}, 400, false)
	c.do(p, "POST", protocol.ProvisionerAcquirePath, map[string]any{"worker_id": "h2", "bogus": 1}, 400, false)
	c.do(p, "POST", protocol.ProvisionerAcquirePath, oaBody{"text/plain", []byte(`{"worker_id":"h2"}`)}, 415, false)
	c.do(dev, "POST", protocol.ProvisionerAcquirePath, map[string]any{"worker_id": "h2"}, 401, false)
	var hb protocol.HeartbeatResponse
	c.decode(c.do(p, "POST", jobPath(protocol.ProvisionerHeartbeatPath, job), map[string]any{"worker_id": "h1", "wait_seconds": 0}, 200, true), &hb)
	if hb.Canceled {
		t.Error("heartbeat answered canceled")
	}
	c.do(p, "POST", jobPath(protocol.ProvisionerHeartbeatPath, job), map[string]any{"worker_id": "h2"}, 409, true)
	c.do(p, "POST", jobPath(protocol.ProvisionerHeartbeatPath, "nope"), map[string]any{"worker_id": "h1"}, 404, true)
	c.do(p, "POST", jobPath(protocol.ProvisionerHeartbeatPath, job), map[string]any{"wait_seconds": 1}, 400, false)
	lines := []map[string]any{{"time": "2026-01-01T05:00:00Z", "stage": "Applying", "level": "info", "output": "terraform_data.home[0]: Creating..."}, {"output": "Apply complete!"}}
	c.do(p, "POST", jobPath(protocol.ProvisionerLogsPath, job), map[string]any{"worker_id": "h1", "lines": lines}, 200, true)
	c.do(p, "POST", jobPath(protocol.ProvisionerLogsPath, job), map[string]any{"worker_id": "h2", "lines": lines}, 409, true)
	c.do(p, "POST", jobPath(protocol.ProvisionerLogsPath, "nope"), map[string]any{"worker_id": "h1", "lines": lines}, 404, true)
	many := make([]map[string]any, protocol.MaxLogLinesPerRequest+1)
	for i := range many {
		many[i] = map[string]any{"output": "x"}
	}
	c.do(p, "POST", jobPath(protocol.ProvisionerLogsPath, job), map[string]any{"worker_id": "h1", "lines": many}, 400, false)

	// Builds while the first runs.
	c.do(dev, "GET", "/api/v1/workspaces/tfw/builds", nil, 200, true)
	c.do(dev, "GET", "/api/v1/workspaces/tfw/builds/1", nil, 200, true)
	c.do(dev, "GET", "/api/v1/workspaces/tfw/builds/latest", nil, 200, true)
	c.do(dev, "GET", "/api/v1/workspaces/tfw/builds/first", nil, 400, false)
	c.do(dev, "GET", "/api/v1/workspaces/tfw/builds/9", nil, 404, true)
	c.do(dev, "GET", "/api/v1/workspaces/nope/builds", nil, 404, true)
	c.do(dev, "POST", "/api/v1/workspaces/tfw/builds", map[string]any{"transition": "stop"}, 409, true)
	c.do(dev, "POST", "/api/v1/workspaces/tfw/builds", map[string]any{"transition": "restart"}, 400, false)
	c.do(dev, "POST", "/api/v1/workspaces/tfw/builds", map[string]any{"transition": "start", "orphan": true}, 400, true)
	c.do(dev, "POST", "/api/v1/workspaces/tfw/builds", oaBody{"text/plain", []byte(`{"transition":"stop"}`)}, 415, false)
	c.do(dev, "POST", "/api/v1/workspaces/nope/builds", map[string]any{"transition": "stop"}, 404, true)
	c.do(dev, "POST", "/api/v1/workspaces/other/builds", map[string]any{"transition": "stop"}, 409, true)
	if l := c.do(dev, "GET", "/api/v1/workspaces/tfw/builds/1/logs", nil, 200, true); bytes.Count(l, []byte("\n")) != 2 {
		t.Errorf("log %s", l)
	}
	c.do(dev, "GET", "/api/v1/workspaces/tfw/builds/1/logs?after=1", nil, 200, true)
	c.do(dev, "GET", "/api/v1/workspaces/tfw/builds/1/logs?after=-1", nil, 400, false)
	c.do(dev, "GET", "/api/v1/workspaces/tfw/builds/9/logs", nil, 404, true)
	// A Kubernetes workspace has no builds.
	c.do(dev, "GET", "/api/v1/workspaces/other/builds/latest", nil, 409, true)
	c.do(dev, "GET", "/api/v1/workspaces/other/builds/latest/logs", nil, 409, true)
	c.do(dev, "GET", "/api/v1/workspaces/other/state", nil, 409, true)
	c.do(dev, "GET", "/api/v1/workspaces/tfw/state", nil, 404, true)

	// The first build ends; its state is pulled and pushed.
	state := tfState(1)
	c.do(p, "POST", jobPath(protocol.ProvisionerFinishPath, job), map[string]any{"worker_id": "h2", "state": state}, 409, true)
	c.do(p, "POST", jobPath(protocol.ProvisionerFinishPath, job), map[string]any{"error": "x"}, 400, false)
	c.do(p, "POST", jobPath(protocol.ProvisionerFinishPath, job), oaBody{"text/plain", []byte(`{"worker_id":"h1"}`)}, 415, false)
	c.do(p, "POST", jobPath(protocol.ProvisionerFinishPath, "nope"), map[string]any{"worker_id": "h1"}, 404, true)
	c.do(p, "POST", jobPath(protocol.ProvisionerFinishPath, job), map[string]any{"worker_id": "h1", "state": state}, 200, true)
	c.do(p, "POST", jobPath(protocol.ProvisionerFinishPath, job), map[string]any{"worker_id": "h1", "state": state}, 409, true)
	if got := c.do(dev, "GET", "/api/v1/workspaces/tfw/state", nil, 200, true); !bytes.Equal(got, state) {
		t.Errorf("state %s, want %s", got, state)
	}
	c.do(dev, "GET", "/api/v1/workspaces/tfw/state?build=1", nil, 200, true)
	c.do(dev, "GET", "/api/v1/workspaces/tfw/state?build=first", nil, 400, false)
	c.do(dev, "GET", "/api/v1/workspaces/tfw/state?build=7", nil, 404, true)
	c.do(dev, "PUT", "/api/v1/workspaces/tfw/state", oaBody{"application/json", tfState(2)}, 204, true)
	c.do(dev, "PUT", "/api/v1/workspaces/tfw/state", oaBody{"text/plain", tfState(2)}, 415, false)
	c.do(dev, "PUT", "/api/v1/workspaces/tfw/state", oaBody{"application/json", []byte(`[1]`)}, 400, false)
	c.do(dev, "PUT", "/api/v1/workspaces/tfw/state", oaBody{"application/json", []byte(`{"version":4,`)}, 400, false)
	c.do(dev, "POST", "/api/v1/workspaces/tfw/update", map[string]any{}, 200, true)
	c.do(dev, "POST", "/api/v1/workspaces/tfw/update", map[string]any{"parameters": map[string]string{"nope": "1"}}, 400, true)
	c.do(dev, "POST", "/api/v1/workspaces/nope/update", map[string]any{}, 404, true)
	c.do(dev, "POST", "/api/v1/workspaces/other/update", map[string]any{}, 409, true)
	c.do(dev, "PUT", "/api/v1/workspaces/nope/state", oaBody{"application/json", tfState(2)}, 404, true)
	c.do(dev, "PUT", "/api/v1/workspaces/other/state", oaBody{"application/json", tfState(2)}, 409, true)

	// A stop, canceled while pending; a start, canceled while running.
	c.do(dev, "POST", "/api/v1/workspaces/tfw/builds", map[string]any{"transition": "stop"}, 201, true)
	c.do(dev, "PUT", "/api/v1/workspaces/tfw/state", oaBody{"application/json", tfState(3)}, 409, true)
	c.do(dev, "POST", "/api/v1/workspaces/tfw/builds/latest/cancel", nil, 200, true)
	c.do(dev, "POST", "/api/v1/workspaces/tfw/builds/2/cancel", nil, 409, true)
	c.do(dev, "POST", "/api/v1/workspaces/tfw/builds/first/cancel", nil, 400, false)
	c.do(dev, "POST", "/api/v1/workspaces/tfw/builds/9/cancel", nil, 404, true)
	c.do(dev, "POST", "/api/v1/workspaces/tfw/builds", map[string]any{"transition": "start", "state": tfState(4)}, 201, true)
	c.decode(c.do(p, "POST", protocol.ProvisionerAcquirePath, map[string]any{"worker_id": "h1"}, 200, true), &acq)
	if acq.Job == nil || acq.Job.BuildNumber != 3 || !bytes.Equal(acq.Job.State, tfState(4)) {
		t.Fatalf("acquire of build 3 %+v", acq.Job)
	}
	job = acq.Job.ID
	var b sdk.Build
	c.decode(c.do(dev, "POST", "/api/v1/workspaces/tfw/builds/3/cancel", nil, 200, true), &b)
	if b.Status != "canceling" {
		t.Fatalf("cancel of a running build %+v", b)
	}
	c.decode(c.do(p, "POST", jobPath(protocol.ProvisionerHeartbeatPath, job), map[string]any{"worker_id": "h1"}, 200, true), &hb)
	if !hb.Canceled {
		t.Error("heartbeat after a cancel answered not canceled")
	}
	c.do(p, "POST", jobPath(protocol.ProvisionerFinishPath, job), map[string]any{"worker_id": "h1", "canceled": true, "error": "interrupted", "state": tfState(5)}, 200, true)
	c.decode(c.do(dev, "GET", "/api/v1/workspaces/tfw/builds/3", nil, 200, true), &b)
	if b.Status != "canceled" || !b.StateCapturedOnCancel {
		t.Errorf("build canceled while running %+v", b)
	}
	if l := c.do(dev, "GET", "/api/v1/workspaces/tfw/builds/3/logs?follow=true", nil, 200, true); !bytes.Contains(l, []byte(`"end":true,"status":"canceled"`)) {
		t.Errorf("followed log of an ended build %s", l)
	}
	c.decode(c.do(dev, "POST", "/api/v1/workspaces/tfw/builds", map[string]any{"transition": "delete", "orphan": true}, 201, true), &b)
	if b.Status != "succeeded" || b.StateSource != "orphan" {
		t.Errorf("orphan delete %+v", b)
	}
	c.do(dev, "POST", "/api/v1/workspaces/tfw/builds", map[string]any{"transition": "start"}, 409, true)
	c.do(dev, "GET", "/api/v1/workspaces/tfw/state", nil, 404, true)
	c.do(dev, "GET", "/api/v1/workspaces/tfw", nil, 200, true)
	c.do(dev, "GET", "/api/v1/workspaces", nil, 200, true)
	var ps []sdk.Provisioner
	c.decode(c.do(admin, "GET", "/api/v1/provisioners", nil, 200, true), &ps)
	if len(ps) != 1 || ps[0].LastSeenAt == nil {
		t.Errorf("provisioners %+v", ps)
	}
}

// oaProxy signs a browser in, sends it through /proxy/authorize, and exchanges and checks as a proxy.
func oaProxy(t *testing.T, c *oaChecker, userToken, agentToken, wsURL string) {
	t.Helper()
	u, err := url.Parse(wsURL)
	if err != nil || u.Host == "" {
		t.Fatalf("workspace URL %q", wsURL)
	}
	host := u.Host
	nonce := strings.Repeat("5a", 32) // the SHA-256 of the proxy's nonce cookie, in hex
	authorize := protocol.ProxyAuthorizePath + "?" + url.Values{"host": {host}, "path": {"/app?x=1"}, "nonce": {nonce}}.Encode()
	c.do("", "GET", authorize, nil, 302, true)
	if loc := c.lastHeader.Get("Location"); !strings.HasPrefix(loc, "/signin?return_to=") {
		t.Errorf("authorize without a session redirects to %q", loc)
	}
	c.do("", "GET", "/signin?return_to="+url.QueryEscape(authorize), nil, 200, true)
	c.do("", "GET", "/signin?return_to="+url.QueryEscape("//evil.example.com/"), nil, 400, true)
	form := func(token, returnTo string) oaBody {
		return oaBody{"application/x-www-form-urlencoded", []byte(url.Values{"token": {token}, "return_to": {returnTo}}.Encode())}
	}
	c.do("", "POST", "/signin", form("hgu_wrong", authorize), 401, true)
	c.do("", "POST", "/signin", form(userToken, "https://evil.example.com/"), 400, true)
	c.do("", "POST", "/signin", form(userToken, authorize), 303, true)
	var session string
	for _, line := range c.lastHeader.Values("Set-Cookie") {
		if v, ok := strings.CutPrefix(line, server.SessionCookie+"="); ok {
			session, _, _ = strings.Cut(v, ";")
		}
	}
	if session == "" || c.lastHeader.Get("Location") != authorize {
		t.Fatalf("sign-in set %q and went to %q", c.lastHeader.Values("Set-Cookie"), c.lastHeader.Get("Location"))
	}
	c.cookie = server.SessionCookie + "=" + session
	c.do("", "GET", authorize, nil, 302, true)
	loc, err := url.Parse(c.lastHeader.Get("Location"))
	if err != nil || loc.Scheme != "https" || loc.Host != host || loc.Path != protocol.ProxyCallbackPath || loc.Query().Get("path") != "/app?x=1" {
		t.Fatalf("authorize with a session redirects to %v", loc)
	}
	c.do("", "GET", protocol.ProxyAuthorizePath+"?host=3000-nope--dev.workspaces.example.com&nonce="+nonce, nil, 404, true)
	c.do("", "GET", protocol.ProxyAuthorizePath+"?host=evil.example.com&nonce="+nonce, nil, 400, true)

	var ex protocol.ProxyExchangeResponse
	code := loc.Query().Get("code")
	c.do(agentToken, "POST", protocol.ProxyExchangePath, protocol.ProxyExchangeRequest{Code: code, Host: host, Nonce: strings.Repeat("00", 32)}, 401, true)
	c.decode(c.do(agentToken, "POST", protocol.ProxyExchangePath, protocol.ProxyExchangeRequest{Code: code, Host: host, Nonce: nonce}, 200, true), &ex)
	c.do(agentToken, "POST", protocol.ProxyExchangePath, protocol.ProxyExchangeRequest{Code: code, Host: host, Nonce: nonce}, 401, true)
	c.do(agentToken, "POST", protocol.ProxyExchangePath, map[string]any{"code": code}, 400, false)
	var ck protocol.ProxyCheckResponse
	c.decode(c.do(agentToken, "POST", protocol.ProxyCheckPath, protocol.ProxyCheckRequest{Host: host, Session: ex.Session}, 200, true), &ck)
	if !ck.Allowed || ck.User != "dev" {
		t.Errorf("check of the new session: %+v", ck)
	}
	c.decode(c.do(agentToken, "POST", protocol.ProxyCheckPath, protocol.ProxyCheckRequest{Host: host, Token: "hgu_nope"}, 200, true), &ck)
	if ck.Allowed || ck.Reason != protocol.ProxyUnauthenticated {
		t.Errorf("check of an unknown token: %+v", ck)
	}
	c.do(agentToken, "POST", protocol.ProxyCheckPath, protocol.ProxyCheckRequest{Host: host}, 400, true)
	c.do(userToken, "POST", protocol.ProxyCheckPath, protocol.ProxyCheckRequest{Host: host, Token: userToken}, 401, false)
	c.do("", "POST", "/signout", nil, 200, true)
	c.cookie = ""
}
