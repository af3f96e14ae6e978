package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/sdk"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// golden compares got with testdata/<name>, or rewrites the file with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/cli -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run go test ./internal/cli -update if the change is intended)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// t0 is when every test's clock starts.
var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// cli runs commands the way cmd/hangar does, with its surroundings replaced: environment, login
// file directory, a clock that moves one second per reading, UTC, and a 1ms poll interval.
type cli struct {
	t      *testing.T
	env    map[string]string
	config string
	mu     sync.Mutex
	ticks  int
	stdin  string
	// terminal makes the commands take stdin for a terminal someone answers on.
	terminal bool
	// limit bounds every command in real time, whatever its --timeout: a wait that never ends
	// fails its test with errCommandLimit instead of hanging the package until go test's timeout.
	limit time.Duration
}

// commandLimit is cli.limit unless a test changes it. It is longer than the --timeout the tests
// give their waits, so that a wait's own timeout is what they see.
const commandLimit = 30 * time.Second

var errCommandLimit = errors.New("test harness: the command did not end in time; a --wait that never ends?")

func newCLI(t *testing.T, env map[string]string) *cli {
	if env == nil {
		env = map[string]string{}
	}
	return &cli{t: t, env: env, config: filepath.Join(t.TempDir(), "hangar", "config.json"), limit: commandLimit}
}

// context returns the context a command runs in: it ends after c.limit, and when the test ends, so
// that a command a failed test leaves running in the background stops.
func (c *cli) context() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeoutCause(context.Background(), c.limit, fmt.Errorf("%w (limit %s)", errCommandLimit, c.limit))
	c.t.Cleanup(cancel)
	return ctx, cancel
}

type result struct {
	stdout, stderr string
	code           int
}

func (c *cli) app() *app {
	return &app{
		getenv:     func(k string) string { return c.env[k] },
		configPath: func() (string, error) { return c.config, nil },
		now: func() time.Time {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.ticks++
			return t0.Add(time.Duration(c.ticks) * time.Second)
		},
		loc:          time.UTC,
		pollInterval: time.Millisecond,
		isTerminal:   func(io.Reader) bool { return c.terminal },
	}
}

func (c *cli) root() *cobra.Command {
	root := &cobra.Command{Use: "hangar", Short: "Hangar: remote development workspaces"}
	addCommands(root, c.app())
	return root
}

func (c *cli) run(args ...string) result {
	c.t.Helper()
	root := c.root()
	var stdout, stderr bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetIn(strings.NewReader(c.stdin))
	root.SetArgs(args)
	ctx, cancel := c.context()
	defer cancel()
	code := execute(ctx, root)
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// ok runs a command that must succeed and returns its stdout.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("hangar %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// fail runs a command that must fail and returns its stderr.
func (c *cli) fail(args ...string) string {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 1 {
		c.t.Fatalf("hangar %s: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stderr
}

// fakeAPI answers the user API with canned data, enough to test what the CLI sends and how it
// prints answers. The end-to-end test runs the same commands against the real server.
type fakeAPI struct {
	mu         sync.Mutex
	token      string
	agents     []sdk.Agent
	workspaces map[string]sdk.Workspace
	// script holds the successive answers to GET /api/v1/workspaces/{name}; the last one repeats.
	script map[string][]sdk.Workspace
	// getStatus, when set, is the status of every GET /api/v1/workspaces/{name}.
	getStatus int
	requests  []request
}

type request struct {
	method, path, auth string
	body               map[string]any
}

const adminToken = "hgu_admin"

func newFakeAPI(t *testing.T) (*fakeAPI, *httptest.Server) {
	f := &fakeAPI{token: adminToken, workspaces: map[string]sdk.Workspace{}, script: map[string][]sdk.Workspace{}}
	srv := httptest.NewServer(f.handler())
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeAPI) last() request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[len(f.requests)-1]
}

func (f *fakeAPI) count(method, path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.requests {
		if r.method == method && r.path == path {
			n++
		}
	}
	return n
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeAPI) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/users/me", func(w http.ResponseWriter, r *http.Request) {
		answer(w, 200, sdk.User{ID: "u-admin", Username: "admin", Admin: true, CreatedAt: t0})
	})
	mux.HandleFunc("POST /api/v1/users", func(w http.ResponseWriter, r *http.Request) {
		var req sdk.CreateUserRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		if strings.ContainsAny(req.Username, "_ ") {
			answer(w, 400, sdk.Error{Code: sdk.CodeInvalid, Message: "invalid request", Validations: []sdk.Validation{{Field: "username", Detail: "must be a DNS label"}}})
			return
		}
		answer(w, 201, sdk.User{ID: "u-" + req.Username, Username: req.Username, Admin: req.Admin, Token: "hgu_new", CreatedAt: t0})
	})
	mux.HandleFunc("POST /api/v1/agents", func(w http.ResponseWriter, r *http.Request) {
		var req sdk.CreateAgentRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		answer(w, 201, sdk.Agent{ID: "a-" + req.Name, Name: req.Name, Token: "hga_new", Config: req.Config, CreatedAt: t0})
	})
	mux.HandleFunc("GET /api/v1/agents", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		answer(w, 200, f.agents)
	})
	mux.HandleFunc("POST /api/v1/workspaces", func(w http.ResponseWriter, r *http.Request) {
		var req sdk.CreateWorkspaceRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		at := t0
		ws := sdk.Workspace{ID: "w-" + req.Name, Name: req.Name, Owner: "admin", Agent: req.Agent, Namespace: "hangar-" + req.Name,
			DesiredState: "Running", ActualState: "CreationRequested", DesiredStateUpdatedAt: &at, CreatedAt: t0}
		f.mu.Lock()
		f.workspaces[ws.Name] = ws
		f.mu.Unlock()
		answer(w, 201, ws)
	})
	mux.HandleFunc("GET /api/v1/workspaces", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		out := []sdk.Workspace{}
		for _, name := range slices.Sorted(maps.Keys(f.workspaces)) {
			out = append(out, f.workspaces[name])
		}
		answer(w, 200, out)
	})
	// The caller is admin: admin/NAME is its own NAME.
	mux.HandleFunc("GET /api/v1/workspaces/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.PathValue("name"), "admin/")
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.getStatus != 0 {
			answer(w, f.getStatus, sdk.Error{Message: "try again"})
			return
		}
		if s := f.script[name]; len(s) > 0 {
			f.workspaces[name] = s[0]
			if len(s) > 1 {
				f.script[name] = s[1:]
			}
		}
		ws, ok := f.workspaces[name]
		if !ok {
			answer(w, 404, sdk.Error{Code: sdk.CodeNotFound, Message: `workspace "` + name + `" not found`})
			return
		}
		answer(w, 200, ws)
	})
	// A Kubernetes workspace has no builds: the server's 409.
	mux.HandleFunc("GET /api/v1/workspaces/{name}/builds/{n}/logs", func(w http.ResponseWriter, r *http.Request) {
		answer(w, 409, sdk.Error{Code: sdk.CodeConflict, Message: sdk.NotTerraformMessage, Detail: "it has no builds"})
	})
	mux.HandleFunc("PATCH /api/v1/workspaces/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.PathValue("name"), "admin/")
		var req sdk.UpdateWorkspaceRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		defer f.mu.Unlock()
		ws, ok := f.workspaces[name]
		if !ok {
			answer(w, 404, sdk.Error{Code: sdk.CodeNotFound, Message: `workspace "` + name + `" not found`})
			return
		}
		if ws.DesiredState == "Terminated" {
			answer(w, 409, sdk.Error{Code: sdk.CodeConflict, Message: "illegal state change", Detail: "the workspace is terminated; termination is permanent"})
			return
		}
		ws.DesiredState = req.DesiredState
		at := t0.Add(time.Minute)
		ws.DesiredStateUpdatedAt = &at
		f.workspaces[name] = ws
		answer(w, 200, ws)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		req := request{method: r.Method, path: r.URL.EscapedPath(), auth: r.Header.Get("Authorization")}
		_ = json.Unmarshal(b, &req.body)
		f.mu.Lock()
		f.requests = append(f.requests, req)
		token := f.token
		f.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+token {
			answer(w, 401, sdk.Error{Code: sdk.CodeUnauthorized, Message: "invalid token"})
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		mux.ServeHTTP(w, r)
	})
}
