package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client calls the user API. Its fields may be changed before the first call; it is safe for
// concurrent use afterwards.
type Client struct {
	// URL is the server's base URL; API paths are appended to its path.
	URL *url.URL
	// Token is sent as `Authorization: Bearer <Token>`; empty sends no Authorization header.
	Token string
	// HTTP does the requests. Deadlines come from each call's context.
	HTTP *http.Client
}

// New returns a client for the server at baseURL (http:// or https://, optionally with a path
// prefix).
func New(baseURL, token string) (*Client, error) {
	baseURL = strings.TrimSpace(baseURL)
	if !strings.Contains(baseURL, "://") {
		return nil, fmt.Errorf("server URL %q: must start with http:// or https://", baseURL)
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("server URL %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("server URL %q: must start with http:// or https://", baseURL)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("server URL %q: has no host", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("server URL %q: must not have a query or fragment", baseURL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return &Client{URL: u, Token: token, HTTP: &http.Client{}}, nil
}

// APIError is a non-2xx answer of the API. The body is named (not embedded) because an embedded
// Error field would clash with the Error method.
type APIError struct {
	StatusCode int
	Body       Error
}

// Error reads like `404 Not Found: workspace "x" not found`, followed by the detail and every
// validation (`field: detail`).
func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString(fmt.Sprintf("%d %s", e.StatusCode, http.StatusText(e.StatusCode)))
	if e.Body.Message != "" {
		b.WriteString(": " + e.Body.Message)
	}
	if e.Body.Detail != "" {
		b.WriteString(": " + e.Body.Detail)
	}
	for i, v := range e.Body.Validations {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(v.Field + ": " + v.Detail)
	}
	return b.String()
}

// maxErrorBody caps how much of an error answer is read: enough for any sdk.Error, not a whole
// HTML page from a misconfigured proxy.
const maxErrorBody = 64 << 10

// CreateUser creates a user (admin only). The answer carries the user's token, shown only once.
func (c *Client) CreateUser(ctx context.Context, req CreateUserRequest) (User, error) {
	var u User
	err := c.do(ctx, http.MethodPost, []string{"users"}, req, &u)
	return u, err
}

// RotateUserToken revokes every token of a user and gives one new one ("me" for the caller;
// others: admin only). The answer carries the new token, shown only once.
func (c *Client) RotateUserToken(ctx context.Context, username string) (User, error) {
	var u User
	err := c.do(ctx, http.MethodPost, []string{"users", username, "token"}, nil, &u)
	return u, err
}

// Me returns the user the token belongs to.
func (c *Client) Me(ctx context.Context) (User, error) {
	var u User
	err := c.do(ctx, http.MethodGet, []string{"users", "me"}, nil, &u)
	return u, err
}

// UpdateProfile changes the caller's profile and returns the caller as changed.
func (c *Client) UpdateProfile(ctx context.Context, req UpdateProfileRequest) (User, error) {
	var u User
	err := c.do(ctx, http.MethodPatch, []string{"users", "me"}, req, &u)
	return u, err
}

// CreateAgent registers an agent (admin only). The answer carries the agent's token, shown only once.
func (c *Client) CreateAgent(ctx context.Context, req CreateAgentRequest) (Agent, error) {
	var a Agent
	err := c.do(ctx, http.MethodPost, []string{"agents"}, req, &a)
	return a, err
}

// ListAgents lists the registered agents.
func (c *Client) ListAgents(ctx context.Context) ([]Agent, error) {
	var as []Agent
	err := c.do(ctx, http.MethodGet, []string{"agents"}, nil, &as)
	return as, err
}

// CreateWorkspace creates a workspace, desired Running.
func (c *Client) CreateWorkspace(ctx context.Context, req CreateWorkspaceRequest) (Workspace, error) {
	var w Workspace
	err := c.do(ctx, http.MethodPost, []string{"workspaces"}, req, &w)
	return w, err
}

// ListWorkspaces lists the workspaces the caller may see, Terminated ones aside: an admin sees
// every user's, a user their own.
func (c *Client) ListWorkspaces(ctx context.Context) ([]Workspace, error) {
	return c.ListWorkspacesWith(ctx, ListWorkspacesOptions{})
}

// ListWorkspacesOptions are the query of GET /workspaces.
type ListWorkspacesOptions struct {
	// All lists Terminated (deleted) workspaces too.
	All bool
	// Prebuilds lists the unclaimed prebuilt workspaces too (admins).
	Prebuilds bool
}

// ListWorkspacesWith lists the workspaces the caller may see, as opts say.
func (c *Client) ListWorkspacesWith(ctx context.Context, opts ListWorkspacesOptions) ([]Workspace, error) {
	var ws []Workspace
	q := url.Values{}
	if opts.All {
		q.Set("all", "true")
	}
	if opts.Prebuilds {
		q.Set("prebuilds", "true")
	}
	err := c.doQuery(ctx, http.MethodGet, []string{"workspaces"}, q, nil, &ws)
	return ws, err
}

// Workspace returns one workspace. name is the caller's own workspace's name, or owner/name.
func (c *Client) Workspace(ctx context.Context, name string) (Workspace, error) {
	var w Workspace
	err := c.do(ctx, http.MethodGet, []string{"workspaces", name}, nil, &w)
	return w, err
}

// UpdateWorkspace changes a workspace's desired state.
func (c *Client) UpdateWorkspace(ctx context.Context, name string, req UpdateWorkspaceRequest) (Workspace, error) {
	var w Workspace
	err := c.do(ctx, http.MethodPatch, []string{"workspaces", name}, req, &w)
	return w, err
}

// WaitForState polls the workspace every interval until until says done or fails, or ctx ends.
// onChange (may be nil) is called with the first answer and then with every answer whose desired
// state, actual state or error differs from the previous one. Network errors and 5xx answers are
// retried until ctx ends; any other API error ends the wait. It returns the last workspace seen.
func (c *Client) WaitForState(ctx context.Context, name string, until func(Workspace) (done bool, err error), onChange func(Workspace), interval time.Duration) (Workspace, error) {
	if interval <= 0 {
		interval = 500 * time.Millisecond
	}
	var last Workspace
	var seen bool
	var lastErr error
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			err := fmt.Errorf("wait for workspace %s: %w", name, context.Cause(ctx))
			if lastErr != nil {
				err = fmt.Errorf("%w (last error: %w)", err, lastErr)
			}
			return last, err
		case <-timer.C:
		}
		w, err := c.Workspace(ctx, name)
		switch {
		case err == nil:
			lastErr = nil
			if !seen || stateChanged(last, w) {
				if onChange != nil {
					onChange(w)
				}
			}
			last, seen = w, true
			done, err := until(w)
			if err != nil {
				return w, err
			}
			if done {
				return w, nil
			}
		case retryable(err) && ctx.Err() == nil:
			lastErr = err
		default:
			if ctx.Err() != nil {
				continue // reported by the ctx.Done case with the cause
			}
			return last, err
		}
		timer.Reset(interval)
	}
}

func stateChanged(a, b Workspace) bool {
	if a.DesiredState != b.DesiredState || a.ActualState != b.ActualState {
		return true
	}
	if (a.Error == nil) != (b.Error == nil) {
		return true
	}
	if a.Error != nil && *a.Error != *b.Error {
		return true
	}
	sa, sb := a.RunningStep(), b.RunningStep()
	return (sa == nil) != (sb == nil) || sa != nil && (sa.Name != sb.Name || sa.Detail != sb.Detail)
}

// retryable says whether a failed poll may succeed if tried again: the server was unreachable or
// answered 5xx.
func retryable(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.StatusCode >= 500
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// endpoint returns the URL of /api/v1/<segments...>, each segment escaped, so that a name holding
// '/' or '..' cannot reach another endpoint.
func (c *Client) endpoint(segments []string, query url.Values) string {
	u := *c.URL
	u.RawQuery = query.Encode()
	p, raw := u.Path+"/api/v1", u.EscapedPath()+"/api/v1"
	for _, s := range segments {
		p += "/" + s
		raw += "/" + url.PathEscape(s)
	}
	u.Path, u.RawPath = p, raw
	return u.String()
}

func (c *Client) do(ctx context.Context, method string, segments []string, in, out any) error {
	return c.doQuery(ctx, method, segments, nil, in, out)
}

func (c *Client) doQuery(ctx context.Context, method string, segments []string, query url.Values, in, out any) error {
	target := c.endpoint(segments, query)
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encode request: %w", method, target, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, target, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "hangar-sdk")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		// *url.Error already names the method and URL.
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return readAPIError(resp)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, target, err)
	}
	return nil
}

func readAPIError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &APIError{StatusCode: resp.StatusCode}
	if err := json.Unmarshal(b, &e.Body); err != nil || e.Body.Message == "" {
		// Not an API error body (a proxy in between, or an older server): keep what can be read.
		e.Body = Error{Message: strings.ToLower(http.StatusText(resp.StatusCode))}
		if text := strings.TrimSpace(string(b)); text != "" && !strings.HasPrefix(text, "<") && len(text) <= 200 && !strings.HasPrefix(text, "{") {
			e.Body.Detail = text
		}
	}
	if e.Body.Message == "" {
		e.Body.Message = fmt.Sprintf("HTTP status %d", resp.StatusCode)
	}
	return e
}
