package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/sdk"
)

func TestNew(t *testing.T) {
	tests := []struct {
		in, wantURL, wantErr string
	}{
		{in: "http://127.0.0.1:7080", wantURL: "http://127.0.0.1:7080"},
		{in: "https://hangar.example.com/", wantURL: "https://hangar.example.com"},
		{in: " https://example.com/prefix/ ", wantURL: "https://example.com/prefix"},
		{in: "127.0.0.1:7080", wantErr: "must start with http:// or https://"},
		{in: "ftp://example.com", wantErr: "must start with http:// or https://"},
		{in: "http://", wantErr: "has no host"},
		{in: "http://example.com/?a=b", wantErr: "must not have a query"},
		{in: "http://exa mple.com", wantErr: "invalid character"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			c, err := sdk.New(tt.in, "tok")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.URL.String(); got != tt.wantURL {
				t.Errorf("URL = %q, want %q", got, tt.wantURL)
			}
			if c.Token != "tok" || c.HTTP == nil {
				t.Errorf("client = %+v", c)
			}
		})
	}
}

// recorded is one request the test server saw.
type recorded struct {
	Method, Path, RawPath, Auth, ContentType string
	Body                                     map[string]any
}

// recorder answers every request with the given status and body and records it.
type recorder struct {
	mu     sync.Mutex
	reqs   []recorded
	status int
	body   string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	rec := recorded{Method: req.Method, Path: req.URL.Path, RawPath: req.URL.EscapedPath(), Auth: req.Header.Get("Authorization"), ContentType: req.Header.Get("Content-Type")}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &rec.Body); err != nil {
			http.Error(w, "bad json", 500)
			return
		}
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, rec)
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(r.status)
	io.WriteString(w, r.body)
}

func (r *recorder) last() recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reqs[len(r.reqs)-1]
}

func newClient(t *testing.T, h http.Handler, prefix string) *sdk.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := sdk.New(srv.URL+prefix, "secret")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEndpoints(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		call     func(c *sdk.Client) (any, error)
		status   int
		answer   string
		want     recorded
		wantResp any
	}{
		{
			name: "CreateUser",
			call: func(c *sdk.Client) (any, error) {
				return c.CreateUser(ctx, sdk.CreateUserRequest{Username: "bob", Admin: true})
			},
			status:   201,
			answer:   `{"id":"u1","username":"bob","admin":true,"token":"hgu_x","created_at":"2026-01-01T05:00:00Z"}`,
			want:     recorded{Method: "POST", Path: "/api/v1/users", Body: map[string]any{"username": "bob", "admin": true}},
			wantResp: sdk.User{ID: "u1", Username: "bob", Admin: true, Token: "hgu_x", CreatedAt: time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC)},
		},
		{
			name:     "Me",
			call:     func(c *sdk.Client) (any, error) { return c.Me(ctx) },
			status:   200,
			answer:   `{"id":"u1","username":"admin","admin":true,"created_at":"2026-01-01T05:00:00Z"}`,
			want:     recorded{Method: "GET", Path: "/api/v1/users/me"},
			wantResp: sdk.User{ID: "u1", Username: "admin", Admin: true, CreatedAt: time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC)},
		},
		{
			name: "CreateAgent",
			call: func(c *sdk.Client) (any, error) {
				return c.CreateAgent(ctx, sdk.CreateAgentRequest{Name: "eu", Config: json.RawMessage(`{"dns_zone":"ws.example.com"}`)})
			},
			status:   201,
			answer:   `{"id":"a1","name":"eu","token":"hga_x","config":{"dns_zone":"ws.example.com"},"created_at":"2026-01-01T05:00:00Z"}`,
			want:     recorded{Method: "POST", Path: "/api/v1/agents", Body: map[string]any{"name": "eu", "config": map[string]any{"dns_zone": "ws.example.com"}}},
			wantResp: sdk.Agent{ID: "a1", Name: "eu", Token: "hga_x", Config: json.RawMessage(`{"dns_zone":"ws.example.com"}`), CreatedAt: time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC)},
		},
		{
			name:     "ListAgents",
			call:     func(c *sdk.Client) (any, error) { return c.ListAgents(ctx) },
			status:   200,
			answer:   `[{"id":"a1","name":"eu","config":{},"created_at":"2026-01-01T05:00:00Z"}]`,
			want:     recorded{Method: "GET", Path: "/api/v1/agents"},
			wantResp: []sdk.Agent{{ID: "a1", Name: "eu", Config: json.RawMessage(`{}`), CreatedAt: time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC)}},
		},
		{
			name: "CreateWorkspace",
			call: func(c *sdk.Client) (any, error) {
				return c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "ws", Agent: "eu"})
			},
			status:   201,
			answer:   `{"name":"ws","agent":"eu","desired_state":"Running","actual_state":"CreationRequested"}`,
			want:     recorded{Method: "POST", Path: "/api/v1/workspaces", Body: map[string]any{"name": "ws", "agent": "eu"}},
			wantResp: sdk.Workspace{Name: "ws", Agent: "eu", DesiredState: "Running", ActualState: "CreationRequested"},
		},
		{
			name:     "ListWorkspaces",
			call:     func(c *sdk.Client) (any, error) { return c.ListWorkspaces(ctx) },
			status:   200,
			answer:   `[{"name":"ws"},{"name":"ws2"}]`,
			want:     recorded{Method: "GET", Path: "/api/v1/workspaces"},
			wantResp: []sdk.Workspace{{Name: "ws"}, {Name: "ws2"}},
		},
		{
			name:     "Workspace",
			call:     func(c *sdk.Client) (any, error) { return c.Workspace(ctx, "ws") },
			status:   200,
			answer:   `{"name":"ws","error":{"type":"applier","message":"boom"}}`,
			want:     recorded{Method: "GET", Path: "/api/v1/workspaces/ws"},
			wantResp: sdk.Workspace{Name: "ws", Error: &sdk.WorkspaceError{Type: "applier", Message: "boom"}},
		},
		{
			name: "UpdateWorkspace",
			call: func(c *sdk.Client) (any, error) {
				return c.UpdateWorkspace(ctx, "ws", sdk.UpdateWorkspaceRequest{DesiredState: "Stopped"})
			},
			status:   200,
			answer:   `{"name":"ws","desired_state":"Stopped"}`,
			want:     recorded{Method: "PATCH", Path: "/api/v1/workspaces/ws", Body: map[string]any{"desired_state": "Stopped"}},
			wantResp: sdk.Workspace{Name: "ws", DesiredState: "Stopped"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{status: tt.status, body: tt.answer}
			got, err := tt.call(newClient(t, rec, ""))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.wantResp) {
				t.Errorf("answer = %#v\nwant %#v", got, tt.wantResp)
			}
			r := rec.last()
			if r.Method != tt.want.Method || r.Path != tt.want.Path || !reflect.DeepEqual(r.Body, tt.want.Body) {
				t.Errorf("request = %s %s %v, want %s %s %v", r.Method, r.Path, r.Body, tt.want.Method, tt.want.Path, tt.want.Body)
			}
			if r.Auth != "Bearer secret" {
				t.Errorf("Authorization = %q", r.Auth)
			}
			if wantCT := map[bool]string{true: "application/json"}[tt.want.Body != nil]; r.ContentType != wantCT {
				t.Errorf("Content-Type = %q, want %q", r.ContentType, wantCT)
			}
		})
	}
}

func TestPathPrefixAndEscaping(t *testing.T) {
	rec := &recorder{status: 200, body: `{}`}
	c := newClient(t, rec, "/hangar/")
	if _, err := c.Workspace(context.Background(), "../users/me"); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.last().RawPath, "/hangar/api/v1/workspaces/..%2Fusers%2Fme"; got != want {
		t.Errorf("path = %q, want %q", got, want)
	}
}

func TestNoTokenSendsNoAuthorization(t *testing.T) {
	rec := &recorder{status: 200, body: `{}`}
	c := newClient(t, rec, "")
	c.Token = ""
	if _, err := c.Me(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a := rec.last().Auth; a != "" {
		t.Errorf("Authorization = %q, want none", a)
	}
}

func TestAPIError(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		want    sdk.Error
		wantMsg string
		// code is the one code IsCode matches ("" for an answer that is not the server's own).
		code string
	}{
		{
			name:    "not found",
			status:  404,
			body:    `{"code":"not_found","message":"workspace \"x\" not found"}`,
			want:    sdk.Error{Code: sdk.CodeNotFound, Message: `workspace "x" not found`},
			wantMsg: `404 Not Found: workspace "x" not found`,
			code:    sdk.CodeNotFound,
		},
		{
			name:   "validations",
			status: 400,
			body:   `{"code":"invalid","message":"invalid request","validations":[{"field":"name","detail":"must be a DNS label"},{"field":"agent","detail":"is required"}]}`,
			want: sdk.Error{Code: sdk.CodeInvalid, Message: "invalid request", Validations: []sdk.Validation{
				{Field: "name", Detail: "must be a DNS label"}, {Field: "agent", Detail: "is required"},
			}},
			wantMsg: `400 Bad Request: invalid request: name: must be a DNS label; agent: is required`,
			code:    sdk.CodeInvalid,
		},
		{
			name:    "detail",
			status:  409,
			body:    `{"code":"conflict","message":"illegal state change","detail":"the workspace is terminated"}`,
			want:    sdk.Error{Code: sdk.CodeConflict, Message: "illegal state change", Detail: "the workspace is terminated"},
			wantMsg: `409 Conflict: illegal state change: the workspace is terminated`,
			code:    sdk.CodeConflict,
		},
		{
			name:    "html from a proxy",
			status:  502,
			body:    `<html><body>Bad Gateway</body></html>`,
			want:    sdk.Error{Message: "bad gateway"},
			wantMsg: `502 Bad Gateway: bad gateway`,
		},
		{
			name:    "plain text",
			status:  413,
			body:    "http: request body too large\n",
			want:    sdk.Error{Message: "request entity too large", Detail: "http: request body too large"},
			wantMsg: `413 Request Entity Too Large: request entity too large: http: request body too large`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, &recorder{status: tt.status, body: tt.body}, "")
			_, err := c.Workspace(context.Background(), "x")
			var ae *sdk.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("error = %#v, want *sdk.APIError", err)
			}
			if ae.StatusCode != tt.status || !reflect.DeepEqual(ae.Body, tt.want) {
				t.Errorf("APIError = %d %#v, want %d %#v", ae.StatusCode, ae.Body, tt.status, tt.want)
			}
			if err.Error() != tt.wantMsg {
				t.Errorf("Error() = %q\nwant      %q", err.Error(), tt.wantMsg)
			}
			for _, code := range sdk.Codes {
				if got := sdk.IsCode(fmt.Errorf("context: %w", err), code); got != (code == tt.code) {
					t.Errorf("IsCode(err, %q) = %v, want %v", code, got, !got)
				}
			}
		})
	}
}

// script answers GET /api/v1/workspaces/ws with its steps in order, repeating the last one.
type script struct {
	mu    sync.Mutex
	steps []step
	n     int
}

type step struct {
	status int
	ws     sdk.Workspace
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	st := s.steps[min(s.n, len(s.steps)-1)]
	s.n++
	s.mu.Unlock()
	w.WriteHeader(st.status)
	if st.status != 200 {
		json.NewEncoder(w).Encode(sdk.Error{Message: http.StatusText(st.status)})
		return
	}
	json.NewEncoder(w).Encode(st.ws)
}

func ws(desired, actual string) step {
	return step{status: 200, ws: sdk.Workspace{Name: "ws", DesiredState: desired, ActualState: actual}}
}

func TestWaitForState(t *testing.T) {
	running := func(w sdk.Workspace) (bool, error) {
		if w.ActualState == "Failed" {
			return false, errors.New("failed")
		}
		return w.ActualState == "Running", nil
	}
	unavailable := step{status: 503}
	tests := []struct {
		name        string
		steps       []step
		timeout     time.Duration
		wantChanges []string
		wantErr     string
		wantLast    string
	}{
		{
			name:        "reaches the goal, reporting each change once",
			steps:       []step{ws("Running", "CreationRequested"), ws("Running", "CreationRequested"), ws("Running", "Starting"), ws("Running", "Starting"), ws("Running", "Running")},
			wantChanges: []string{"Running/CreationRequested", "Running/Starting", "Running/Running"},
			wantLast:    "Running",
		},
		{
			name:        "already there",
			steps:       []step{ws("Running", "Running")},
			wantChanges: []string{"Running/Running"},
			wantLast:    "Running",
		},
		{
			name:        "until fails",
			steps:       []step{ws("Running", "Starting"), ws("Running", "Failed")},
			wantChanges: []string{"Running/Starting", "Running/Failed"},
			wantErr:     "failed",
			wantLast:    "Failed",
		},
		{
			name:        "5xx is retried",
			steps:       []step{ws("Running", "Starting"), unavailable, unavailable, ws("Running", "Running")},
			wantChanges: []string{"Running/Starting", "Running/Running"},
			wantLast:    "Running",
		},
		{
			name:     "404 ends the wait",
			steps:    []step{{status: 404}},
			wantErr:  "404 Not Found",
			wantLast: "",
		},
		{
			name:        "timeout names the last error",
			steps:       []step{ws("Running", "Starting"), unavailable},
			timeout:     50 * time.Millisecond,
			wantChanges: []string{"Running/Starting"},
			wantErr:     "wait for workspace ws: context deadline exceeded (last error: 503 Service Unavailable",
			wantLast:    "Starting",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, &script{steps: tt.steps}, "")
			ctx := context.Background()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			var changes []string
			last, err := c.WaitForState(ctx, "ws", running, func(w sdk.Workspace) {
				changes = append(changes, w.DesiredState+"/"+w.ActualState)
			}, time.Millisecond)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("error = %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
			}
			if !reflect.DeepEqual(changes, tt.wantChanges) {
				t.Errorf("changes = %q, want %q", changes, tt.wantChanges)
			}
			if last.ActualState != tt.wantLast {
				t.Errorf("last actual state = %q, want %q", last.ActualState, tt.wantLast)
			}
		})
	}
}

func TestWaitForStateStopsWithContext(t *testing.T) {
	c := newClient(t, &script{steps: []step{ws("Running", "Starting")}}, "")
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	_, err := c.WaitForState(ctx, "ws", func(sdk.Workspace) (bool, error) {
		calls++
		if calls == 3 {
			cancel()
		}
		return false, nil
	}, nil, time.Millisecond)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
}

// A workspace that never reaches the goal, read more slowly than the poll interval, ends the wait
// at the context's deadline.
func TestWaitForStateEndsAtTheDeadline(t *testing.T) {
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(5 * time.Millisecond)
		json.NewEncoder(w).Encode(sdk.Workspace{Name: "ws", DesiredState: "Running", ActualState: "Starting"})
	})
	c := newClient(t, slow, "")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	reads := 0
	go func() {
		_, err := c.WaitForState(ctx, "ws", func(sdk.Workspace) (bool, error) {
			reads++
			return false, nil
		}, nil, time.Millisecond)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error = %v, want context.DeadlineExceeded", err)
		}
		if reads < 2 {
			t.Errorf("%d reads, want the wait to have polled again after a slow read", reads)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitForState did not end 10s after its 100ms deadline")
	}
}
