package cli

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/sdk"
)

func TestHelp(t *testing.T) {
	commands := []string{
		"", "login", "users", "users create", "agents", "agents create", "agents list",
		"create", "list", "show", "start", "stop", "restart", "delete",
		"ssh-keys", "ssh-keys add", "ssh-keys list", "ssh-keys remove", "ssh", "port-forward", "config-ssh", "audit",
		"tokens", "tokens create", "tokens list", "tokens revoke", "users suspend", "users delete", "agents update", "whoami", "profile", "profile set", "logout", "version",
		"templates lifecycle", "templates delete", "templates init",
		"templates", "templates push", "templates pull", "templates promote", "update", "builds",
		"external-auth", "external-auth list", "external-auth link", "external-auth unlink", "gitssh", "gitssh rotate",
	}
	for _, c := range commands {
		name := strings.ReplaceAll(c, " ", "-")
		if name == "" {
			name = "hangar"
		}
		t.Run(name, func(t *testing.T) {
			args := append(strings.Fields(c), "--help")
			golden(t, "help/"+name+".golden", newCLI(t, nil).ok(args...))
		})
	}
}

func ptr[T any](v T) *T { return &v }

// sample is a workspace with every field set.
func sample() sdk.Workspace {
	return sdk.Workspace{
		ID: "0b9f5f9e-1c1d-4d7e-9a55-2b1f4f3c8e01", Name: "api-dev", Owner: "alice", Agent: "eu-west", Namespace: "hangar-api-dev",
		DesiredState: "Running", ActualState: "Error",
		DesiredStateUpdatedAt:     ptr(t0.Add(-2 * time.Hour)),
		ActualStateUpdatedAt:      ptr(t0.Add(-time.Hour)),
		RespondedToAgentAt:        ptr(t0.Add(-30 * time.Minute)),
		DeploymentResourceVersion: ptr("48213"),
		Error:                     &sdk.WorkspaceError{Type: "applier", Message: `Deployment "api-dev": admission webhook denied the request`},
		URL:                       "https://3000-api-dev.ws.example.com/",
		CreatedAt:                 t0.Add(-3 * time.Hour),
		LastActivityAt:            ptr(t0.Add(-5 * time.Minute)),
		Helper: sdk.WorkspaceHelper{Status: "waiting", Since: ptr(t0.Add(-2 * time.Hour)), LastError: `Deployment "api-dev": admission webhook denied the request`,
			Problem: "the workspace's pod is not ready 2h0m0s after the start: its image may still be pulled or missing from the node"},
		Endpoints: []sdk.WorkspaceEndpoint{
			{Name: "web", Container: "main", Port: 3000, Exposure: "public", URL: "https://3000-api-dev.ws.example.com/"},
			{Name: "debug", Container: "main", Port: 5858, Exposure: "none"},
		},
	}
}

func TestTables(t *testing.T) {
	f, srv := newFakeAPI(t)
	fresh := sdk.Workspace{ID: "w-2", Name: "docs", Owner: "bob", Agent: "us-east", Namespace: "shared-ws",
		DesiredState: "Running", ActualState: "CreationRequested", DesiredStateUpdatedAt: ptr(t0), CreatedAt: t0,
		Helper: sdk.WorkspaceHelper{Status: "waiting", Since: ptr(t0)}}
	// A Terraform workspace Running for three minutes whose helper never connected.
	vm := sdk.Workspace{ID: "w-3", Name: "vm", Owner: "carol", Backend: "terraform", Template: "linux", TemplateVersion: 2,
		DesiredState: "Running", ActualState: "Running", DesiredStateUpdatedAt: ptr(t0.Add(-4 * time.Minute)), ActualStateUpdatedAt: ptr(t0.Add(-3 * time.Minute)), CreatedAt: t0.Add(-4 * time.Minute),
		Helper: sdk.WorkspaceHelper{Status: "waiting", Since: ptr(t0.Add(-3 * time.Minute)), LastError: "the connection was lost (the machine stopped, its helper exited, or the network failed)",
			Problem: "the helper has not connected 3m0s after the workspace became Running: the machine may not run hangar_agent's init script"}}
	// A workspace made from a repository, whose definition was last read at a commit.
	fromRepo := fresh
	fromRepo.ID, fromRepo.Name, fromRepo.Definition = "w-4", "app", "devcontainer.json"
	fromRepo.Repository = &sdk.WorkspaceRepository{URL: "https://git.example.com/team/app.git", Ref: "main", DevcontainerPath: ".devcontainer/go/devcontainer.json",
		Commit: "4b825dc642cb6eb9a060e54bf8d69288fbee4904", DefinitionPath: ".devcontainer/go/devcontainer.json", ReadAt: t0.Add(-time.Minute)}
	fromRepo.Dotfiles = &sdk.WorkspaceDotfiles{Status: "failed", Repository: "https://git.example.com/bob/dots.git", Script: "install.sh",
		Error: "install.sh: exit status 2", Log: "dotfiles: running install.sh with /bin/sh -l\nmake: *** No rule to make target 'all'.\ndotfiles: failed: install.sh: exit status 2\n",
		UpdatedAt: ptr(t0.Add(-30 * time.Second))}
	installed := fresh
	installed.ID, installed.Name = "w-5", "dots"
	installed.Dotfiles = &sdk.WorkspaceDotfiles{Status: "installed", Repository: "https://git.example.com/bob/dots.git", Script: "install.sh", UpdatedAt: ptr(t0)}
	// A first build of a team's image: prepare done, the build running, push to come; and one
	// whose build failed (its log's terminal escapes are not passed on).
	building := fresh
	building.ID, building.Name, building.ActualState = "w-6", "img", "Starting"
	building.StartupSteps = []sdk.WorkspaceStartupStep{
		{Name: "image-prepare", State: "done", StartedAt: ptr(t0.Add(-3 * time.Minute)), EndedAt: ptr(t0.Add(-170 * time.Second)),
			Detail: "building registry.example.com/builds:2062e68c from debian:12: 7 steps, 2 features", UpdatedAt: t0},
		{Name: "image-build", State: "running", StartedAt: ptr(t0.Add(-170 * time.Second)), Detail: "step 3/7: RUN apt-get install -y make (Dockerfile:5)",
			Log: "step 3/7: RUN apt-get install -y make (Dockerfile:5)\n    Setting up make\n", UpdatedAt: t0},
		{Name: "image-push", State: "pending", UpdatedAt: t0},
	}
	broken := building
	broken.ID, broken.Name, broken.ActualState = "w-7", "broken", "Failed"
	broken.StartupSteps = []sdk.WorkspaceStartupStep{building.StartupSteps[0],
		{Name: "image-build", State: "failed", StartedAt: ptr(t0.Add(-170 * time.Second)), EndedAt: ptr(t0.Add(-100 * time.Second)), Detail: "step 4/7: RUN make (Dockerfile:6)",
			Log: "step 4/7: RUN make (Dockerfile:6)\n    \x1b[31mmake: *** No rule to make target 'all'.\x1b[0m\nimage build: step 4/7: RUN make (Dockerfile:6) exited with code 2\n", UpdatedAt: t0},
		{Name: "image-push", State: "pending", UpdatedAt: t0}}
	// A Terraform workspace whose postStart commands failed: Running, startup failed.
	vmFailed := vm
	vmFailed.ID, vmFailed.Name, vmFailed.StartupFailed = "w-8", "vm-post", "post-start"
	vmFailed.StartupSteps = []sdk.WorkspaceStartupStep{{Name: "post-start", State: "failed", StartedAt: ptr(t0.Add(-2 * time.Minute)), EndedAt: ptr(t0.Add(-110 * time.Second)),
		Detail: "command 2/2: setup", Log: "npm ERR! missing script: setup\npostStart command \"setup\": exit status 1\n", UpdatedAt: t0}}
	f.workspaces = map[string]sdk.Workspace{"api-dev": sample(), "docs": fresh, "vm": vm, "app": fromRepo, "dots": installed, "img": building, "broken": broken, "vm-post": vmFailed}
	f.agents = []sdk.Agent{
		{ID: "a1", Name: "eu-west", Config: json.RawMessage(`{"dns_zone":"ws.example.com","namespace_mode":"per_workspace"}`), CreatedAt: t0},
		{ID: "a2", Name: "us-east", Config: json.RawMessage(`{"dns_zone":"us.example.com","namespace_mode":"shared","shared_namespace":"shared-ws","unknown":1}`), CreatedAt: t0.Add(time.Hour)},
	}
	c := newCLI(t, map[string]string{"HANGAR_URL": srv.URL, "HANGAR_TOKEN": adminToken})
	tests := []struct {
		golden string
		args   []string
	}{
		{"list.golden", []string{"list"}},
		{"show-all-fields.golden", []string{"show", "api-dev"}},
		{"show-new.golden", []string{"show", "docs"}},
		{"show-repository.golden", []string{"show", "app"}},
		{"show-dotfiles.golden", []string{"show", "dots"}},
		{"show-startup.golden", []string{"show", "img"}},
		{"show-startup-failed.golden", []string{"show", "broken"}},
		{"show-poststart-failed.golden", []string{"show", "vm-post"}},
		{"show-terraform-helper.golden", []string{"show", "vm"}},
		{"agents-list.golden", []string{"agents", "list"}},
		{"users-create.golden", []string{"users", "create", "carol"}},
		{"users-create-admin.golden", []string{"users", "create", "dave", "--admin"}},
		{"agents-create.golden", []string{"agents", "create", "ap-south"}},
		{"create.golden", []string{"create", "web", "--agent", "eu-west"}},
		{"stop.golden", []string{"stop", "api-dev"}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			golden(t, "output/"+tt.golden, c.ok(tt.args...))
		})
	}
}

func TestEmptyLists(t *testing.T) {
	_, srv := newFakeAPI(t)
	c := newCLI(t, map[string]string{"HANGAR_URL": srv.URL, "HANGAR_TOKEN": adminToken})
	if got := c.ok("list"); got != "No workspaces.\n" {
		t.Errorf("list = %q", got)
	}
	if got := c.ok("agents", "list"); got != "No agents.\n" {
		t.Errorf("agents list = %q", got)
	}
	if got := c.ok("list", "-o", "json"); got != "[]\n" {
		t.Errorf("list -o json = %q", got)
	}
}

func TestJSONOutput(t *testing.T) {
	f, srv := newFakeAPI(t)
	f.workspaces = map[string]sdk.Workspace{"api-dev": sample()}
	c := newCLI(t, map[string]string{"HANGAR_URL": srv.URL, "HANGAR_TOKEN": adminToken})

	out := c.ok("show", "api-dev", "--output", "json")
	var got sdk.Workspace
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("show -o json is not a workspace: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(got, sample()) {
		t.Errorf("show -o json = %+v, want %+v", got, sample())
	}
	if !strings.Contains(out, "\n  \"desired_state\": \"Running\",\n") {
		t.Errorf("show -o json is not indented API JSON:\n%s", out)
	}

	var list []sdk.Workspace
	if err := json.Unmarshal([]byte(c.ok("list", "-o", "json")), &list); err != nil || len(list) != 1 || list[0].Name != "api-dev" {
		t.Errorf("list -o json = %+v, %v", list, err)
	}
	var u sdk.User
	if err := json.Unmarshal([]byte(c.ok("users", "create", "erin", "-o", "json")), &u); err != nil || u.Token != "hgu_new" {
		t.Errorf("users create -o json = %+v, %v", u, err)
	}

	if stderr := c.fail("list", "-o", "yaml"); !strings.Contains(stderr, `error: --output "yaml": must be table or json`) {
		t.Errorf("stderr = %q", stderr)
	}
}

func TestRequests(t *testing.T) {
	f, srv := newFakeAPI(t)
	f.workspaces = map[string]sdk.Workspace{"api-dev": sample()}
	dir := t.TempDir()
	devfile := filepath.Join(dir, "devfile.yaml")
	if err := os.WriteFile(devfile, []byte("schemaVersion: 2.2.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	agentConfig := filepath.Join(dir, "agent.json")
	if err := os.WriteFile(agentConfig, []byte(`{"dns_zone": "ws.example.com"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, map[string]string{"HANGAR_URL": srv.URL, "HANGAR_TOKEN": adminToken})
	tests := []struct {
		args []string
		want request
	}{
		{[]string{"users", "create", "bob"}, request{method: "POST", path: "/api/v1/users", body: map[string]any{"username": "bob"}}},
		{[]string{"users", "create", "root", "--admin"}, request{method: "POST", path: "/api/v1/users", body: map[string]any{"username": "root", "admin": true}}},
		{[]string{"agents", "create", "eu"}, request{method: "POST", path: "/api/v1/agents", body: map[string]any{"name": "eu"}}},
		{[]string{"agents", "create", "eu", "--config", agentConfig}, request{method: "POST", path: "/api/v1/agents",
			body: map[string]any{"name": "eu", "config": map[string]any{"dns_zone": "ws.example.com"}}}},
		{[]string{"agents", "list"}, request{method: "GET", path: "/api/v1/agents"}},
		{[]string{"create", "web", "--agent", "eu"}, request{method: "POST", path: "/api/v1/workspaces", body: map[string]any{"name": "web", "agent": "eu"}}},
		{[]string{"create", "web2", "--agent", "eu", "--devfile", devfile}, request{method: "POST", path: "/api/v1/workspaces",
			body: map[string]any{"name": "web2", "agent": "eu", "devfile": "schemaVersion: 2.2.0\n"}}},
		{[]string{"list"}, request{method: "GET", path: "/api/v1/workspaces"}},
		{[]string{"show", "api-dev"}, request{method: "GET", path: "/api/v1/workspaces/api-dev"}},
		{[]string{"start", "api-dev"}, request{method: "PATCH", path: "/api/v1/workspaces/api-dev", body: map[string]any{"desired_state": "Running"}}},
		{[]string{"stop", "api-dev"}, request{method: "PATCH", path: "/api/v1/workspaces/api-dev", body: map[string]any{"desired_state": "Stopped"}}},
		{[]string{"restart", "api-dev"}, request{method: "PATCH", path: "/api/v1/workspaces/api-dev", body: map[string]any{"desired_state": "RestartRequested"}}},
		{[]string{"delete", "api-dev", "--yes"}, request{method: "PATCH", path: "/api/v1/workspaces/api-dev", body: map[string]any{"desired_state": "Terminated"}}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c.ok(tt.args...)
			got := f.last()
			tt.want.auth = "Bearer " + adminToken
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("request = %+v\nwant      %+v", got, tt.want)
			}
		})
	}
}

func TestInputFiles(t *testing.T) {
	f, srv := newFakeAPI(t)
	c := newCLI(t, map[string]string{"HANGAR_URL": srv.URL, "HANGAR_TOKEN": adminToken})

	c.stdin = "schemaVersion: 2.2.0\ncomponents: []\n"
	c.ok("create", "web", "--agent", "eu", "--devfile", "-")
	if got := f.last().body["devfile"]; got != c.stdin {
		t.Errorf("devfile from stdin = %q", got)
	}

	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"dns_zone": `), 0o644)
	if stderr := c.fail("agents", "create", "eu", "--config", bad); !strings.Contains(stderr, "error: read --config "+bad+": not valid JSON") {
		t.Errorf("stderr = %q", stderr)
	}
	big := filepath.Join(t.TempDir(), "big.yaml")
	os.WriteFile(big, make([]byte, sdk.MaxDevfileBytes+1), 0o644)
	if stderr := c.fail("create", "web", "--agent", "eu", "--devfile", big); !strings.Contains(stderr, "the server accepts at most 262144") {
		t.Errorf("stderr = %q", stderr)
	}
	if stderr := c.fail("create", "web", "--agent", "eu", "--devfile", "/does/not/exist"); !strings.Contains(stderr, "error: read --devfile: open /does/not/exist: no such file or directory") {
		t.Errorf("stderr = %q", stderr)
	}
}

func TestErrors(t *testing.T) {
	f, srv := newFakeAPI(t)
	f.workspaces = map[string]sdk.Workspace{"gone": {Name: "gone", DesiredState: "Terminated", ActualState: "Terminated"}}
	c := newCLI(t, map[string]string{"HANGAR_URL": srv.URL, "HANGAR_TOKEN": adminToken})
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantStderr string
	}{
		{"not found", []string{"show", "nope"}, nil, "error: workspace \"nope\" not found\n"},
		{"validation", []string{"users", "create", "bad_name"}, nil, "error: invalid request\n  username: must be a DNS label\n"},
		{"conflict with detail", []string{"start", "gone"}, nil, "error: illegal state change: the workspace is terminated; termination is permanent\n"},
		{"bad token", []string{"list"}, map[string]string{"HANGAR_TOKEN": "wrong"},
			"error: invalid token (log in with 'hangar login --url URL --token TOKEN', or set HANGAR_TOKEN)\n"},
		{"missing argument", []string{"show"}, nil, "error: hangar show takes exactly one workspace name, got 0 arguments\nRun 'hangar show --help' for usage.\n"},
		{"unknown flag", []string{"list", "--nope"}, nil, "error: unknown flag: --nope\nRun 'hangar list --help' for usage.\n"},
		{"unknown subcommand", []string{"users", "bogus"}, nil, "error: unknown command \"bogus\" for \"hangar users\"\nRun 'hangar users --help' for usage.\n"},
		{"agent or template", []string{"create", "web"}, nil, "error: give --agent (a cluster) or --template (a template)\nRun 'hangar create --help' for usage.\n"},
		{"bad URL", []string{"list"}, map[string]string{"HANGAR_URL": "localhost:7080"}, "error: server URL \"localhost:7080\": must start with http:// or https://\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				old := c.env[k]
				c.env[k] = v
				defer func() { c.env[k] = old }()
			}
			if got := c.fail(tt.args...); got != tt.wantStderr {
				t.Errorf("stderr = %q\nwant     %q", got, tt.wantStderr)
			}
		})
	}

	// An unreachable server: the message names what was tried.
	srv.Close()
	if got := c.fail("list"); !strings.HasPrefix(got, `error: Get "`+srv.URL+`/api/v1/workspaces": dial tcp`) {
		t.Errorf("stderr = %q", got)
	}
}

func TestPrintErrorKeepsContext(t *testing.T) {
	var b strings.Builder
	ae := &sdk.APIError{StatusCode: 400, Body: sdk.Error{Message: "invalid request", Validations: []sdk.Validation{{Field: "name", Detail: "too long"}}}}
	printError(&b, errors.Join(ae))
	printError(&b, wrap("create workspace x", ae))
	want := "error: invalid request\n  name: too long\nerror: create workspace x: invalid request\n  name: too long\n"
	if b.String() != want {
		t.Errorf("printed %q\nwant    %q", b.String(), want)
	}
}

type wrapped struct {
	msg string
	err error
}

func (w wrapped) Error() string { return w.msg + ": " + w.err.Error() }
func (w wrapped) Unwrap() error { return w.err }

func wrap(msg string, err error) error { return wrapped{msg, err} }

func TestConfigPath(t *testing.T) {
	home := func() (string, error) { return "/home/u", nil }
	tests := []struct {
		xdg, want string
	}{
		{"", "/home/u/.config/hangar/config.json"},
		{"/xdg", "/xdg/hangar/config.json"},
		{"relative", "/home/u/.config/hangar/config.json"}, // the XDG spec says to ignore relative paths
	}
	for _, tt := range tests {
		got, err := configPath(func(string) string { return tt.xdg }, home)
		if err != nil || got != tt.want {
			t.Errorf("configPath(XDG_CONFIG_HOME=%q) = %q, %v; want %q", tt.xdg, got, err, tt.want)
		}
	}
}

func TestLogin(t *testing.T) {
	f, srv := newFakeAPI(t)
	c := newCLI(t, nil)

	if got := c.fail("login", "--url", srv.URL); got != "error: a token is required: pass --token or set HANGAR_TOKEN\nRun 'hangar login --help' for usage.\n" {
		t.Errorf("login without token: %q", got)
	}
	if got := c.fail("login", "--url", srv.URL, "--token", "wrong"); !strings.HasPrefix(got, "error: the server at "+srv.URL+" refused the token: ") {
		t.Errorf("login with a bad token: %q", got)
	}
	if _, err := os.Stat(c.config); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed login wrote the login file: %v", err)
	}

	if got, want := c.ok("login", "--url", srv.URL+"/", "--token", adminToken), "Logged in to "+srv.URL+" as admin\n"; got != want {
		t.Errorf("login = %q, want %q", got, want)
	}
	st, err := os.Stat(c.config)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("login file mode = %v, want 0600", st.Mode().Perm())
	}
	b, _ := os.ReadFile(c.config)
	var saved config
	if err := json.Unmarshal(b, &saved); err != nil || saved != (config{URL: srv.URL, Token: adminToken}) {
		t.Errorf("login file = %s (%v)", b, err)
	}

	// Saved URL and token are used when nothing else is given.
	c.ok("list")
	if got := f.last().auth; got != "Bearer "+adminToken {
		t.Errorf("Authorization after login = %q", got)
	}
	// The environment beats the login file, and a flag beats the environment.
	c.env["HANGAR_TOKEN"] = "from-env"
	c.fail("list")
	if got := f.last().auth; got != "Bearer from-env" {
		t.Errorf("Authorization with HANGAR_TOKEN = %q", got)
	}
	c.ok("list", "--token", adminToken)
	if got := f.last().auth; got != "Bearer "+adminToken {
		t.Errorf("Authorization with --token = %q", got)
	}
	delete(c.env, "HANGAR_TOKEN")

	// The saved token goes only to the server it was saved for.
	other, otherSrv := newFakeAPI(t)
	c.fail("list", "--url", otherSrv.URL)
	if got := other.last().auth; got != "" {
		t.Errorf("the saved token was sent to another server: %q", got)
	}
	c.env["HANGAR_URL"] = otherSrv.URL
	c.fail("list")
	if got := other.last().auth; got != "" {
		t.Errorf("the saved token was sent to HANGAR_URL's server: %q", got)
	}
	delete(c.env, "HANGAR_URL")

	// A second login replaces the first.
	c.ok("login", "--url", otherSrv.URL, "--token", adminToken)
	c.ok("list")
	if other.last().path != "/api/v1/workspaces" || other.last().auth != "Bearer "+adminToken {
		t.Errorf("after the second login, list went to %+v", other.last())
	}
}

// Without a login, a flag or HANGAR_URL there is no server: the CLI says so and how to log in,
// instead of trying 127.0.0.1:7080 unasked.
func TestNoServerWithoutLogin(t *testing.T) {
	c := newCLI(t, nil)
	a := c.app()
	root := c.root()
	list, _, _ := root.Find([]string{"list"})
	if u, token, err := a.connection(list); !errors.Is(err, errNoServer) || u != "" || token != "" {
		t.Errorf("connection() = %q, %q, %v; want errNoServer", u, token, err)
	}
	if got := c.fail("list"); !strings.Contains(got, "error: no server: you are not logged in. Run 'hangar login --url URL --token TOKEN'") {
		t.Errorf("list without a login: %q", got)
	}
	if got := c.fail("login", "--token", adminToken); !strings.Contains(got, "error: the server's URL is required: pass --url") {
		t.Errorf("login without --url: %q", got)
	}

	os.MkdirAll(filepath.Dir(c.config), 0o700)
	os.WriteFile(c.config, []byte("{not json"), 0o600)
	if got := c.fail("list"); !strings.Contains(got, "error: read login file "+c.config) || !strings.Contains(got, "run 'hangar login' again") {
		t.Errorf("corrupt login file: %q", got)
	}
	// Flags alone do not need the login file.
	_, srv := newFakeAPI(t)
	c.ok("list", "--url", srv.URL, "--token", adminToken)
	// login replaces a corrupt file.
	c.ok("login", "--url", srv.URL, "--token", adminToken)
	c.ok("list")
}
