package sdk

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// PushTemplateVersion pushes a new version of a template (admin only), creating the template on
// its first push.
func (c *Client) PushTemplateVersion(ctx context.Context, name string, req CreateTemplateVersionRequest) (Template, error) {
	var t Template
	err := c.do(ctx, http.MethodPost, []string{"templates", name, "versions"}, req, &t)
	return t, err
}

// ListTemplates lists the templates.
// ListTemplateVersions lists a template's versions, newest first.
func (c *Client) ListTemplateVersions(ctx context.Context, name string) ([]TemplateVersion, error) {
	var vs []TemplateVersion
	err := c.do(ctx, http.MethodGet, []string{"templates", name, "versions"}, nil, &vs)
	return vs, err
}

// PromoteTemplateVersion makes version number the template's active version.
func (c *Client) PromoteTemplateVersion(ctx context.Context, name string, number int) (Template, error) {
	var t Template
	err := c.do(ctx, http.MethodPost, []string{"templates", name, "versions", strconv.Itoa(number), "promote"}, nil, &t)
	return t, err
}

// PullTemplateVersion downloads a version's content (number 0: the active version): a terraform
// module as a gzipped tar, or a devfile. It returns the version's number too.
func (c *Client) PullTemplateVersion(ctx context.Context, name string, number int) ([]byte, int, error) {
	v := "active"
	if number > 0 {
		v = strconv.Itoa(number)
	}
	resp, err := c.raw(ctx, http.MethodGet, c.endpoint([]string{"templates", name, "versions", v, "archive"}, nil), nil, "")
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxTemplateArchiveBytes+1))
	if err != nil {
		return nil, 0, fmt.Errorf("read template version: %w", err)
	}
	if len(b) > MaxTemplateArchiveBytes {
		return nil, 0, fmt.Errorf("read template version: more than %d bytes", MaxTemplateArchiveBytes)
	}
	n, _ := strconv.Atoi(resp.Header.Get("Hangar-Template-Version"))
	return b, n, nil
}

// UpdateWorkspaceVersion moves a terraform workspace to its template's active version and to new
// parameter values (hangar update).
func (c *Client) UpdateWorkspaceVersion(ctx context.Context, workspace string, req UpdateWorkspaceVersionRequest) (UpdateWorkspaceVersionResponse, error) {
	var out UpdateWorkspaceVersionResponse
	err := c.do(ctx, http.MethodPost, []string{"workspaces", workspace, "update"}, req, &out)
	return out, err
}

func (c *Client) ListTemplates(ctx context.Context) ([]Template, error) {
	var ts []Template
	err := c.do(ctx, http.MethodGet, []string{"templates"}, nil, &ts)
	return ts, err
}

// Template returns a template with its versions.
func (c *Client) Template(ctx context.Context, name string) (Template, error) {
	var t Template
	err := c.do(ctx, http.MethodGet, []string{"templates", name}, nil, &t)
	return t, err
}

// CreateBuild starts a build of a terraform workspace.
func (c *Client) CreateBuild(ctx context.Context, workspace string, req CreateBuildRequest) (Build, error) {
	var b Build
	err := c.do(ctx, http.MethodPost, []string{"workspaces", workspace, "builds"}, req, &b)
	return b, err
}

// ListBuilds lists a workspace's builds, newest first.
func (c *Client) ListBuilds(ctx context.Context, workspace string) ([]Build, error) {
	var bs []Build
	err := c.do(ctx, http.MethodGet, []string{"workspaces", workspace, "builds"}, nil, &bs)
	return bs, err
}

func buildSegment(number int) string {
	if number <= 0 {
		return "latest"
	}
	return strconv.Itoa(number)
}

// Build returns one build (number 0: the latest).
func (c *Client) Build(ctx context.Context, workspace string, number int) (Build, error) {
	var b Build
	err := c.do(ctx, http.MethodGet, []string{"workspaces", workspace, "builds", buildSegment(number)}, nil, &b)
	return b, err
}

// CancelBuild cancels a build (number 0: the latest).
func (c *Client) CancelBuild(ctx context.Context, workspace string, number int) (Build, error) {
	var b Build
	err := c.do(ctx, http.MethodPost, []string{"workspaces", workspace, "builds", buildSegment(number), "cancel"}, nil, &b)
	return b, err
}

// BuildLogs reads a build's log lines after the line id after, calling fn for each. With follow, it
// returns once the build has ended (fn's last call then has End set) or ctx ends.
func (c *Client) BuildLogs(ctx context.Context, workspace string, number int, after int64, follow bool, fn func(BuildLog) error) error {
	target := c.endpoint([]string{"workspaces", workspace, "builds", buildSegment(number), "logs"}, nil) +
		"?after=" + strconv.FormatInt(after, 10) + "&follow=" + strconv.FormatBool(follow)
	resp, err := c.raw(ctx, http.MethodGet, target, nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var l BuildLog
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return fmt.Errorf("read build log: %w", err)
		}
		if err := fn(l); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read build log: %w", err)
	}
	return nil
}

// PullState returns the Terraform state of a build (number 0: the latest) and the build's number.
func (c *Client) PullState(ctx context.Context, workspace string, number int) ([]byte, int, error) {
	target := c.endpoint([]string{"workspaces", workspace, "state"}, nil)
	if number > 0 {
		target += "?build=" + strconv.Itoa(number)
	}
	resp, err := c.raw(ctx, http.MethodGet, target, nil, "")
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, protocol.MaxStateBytes+1))
	if err != nil {
		return nil, 0, fmt.Errorf("read state: %w", err)
	}
	n, _ := strconv.Atoi(resp.Header.Get("Hangar-Build-Number"))
	return b, n, nil
}

// PushState replaces the state of the workspace's latest build, without a build.
//
// The server refuses a state that is not a Terraform state (400) or that does not follow the saved
// one, with the same lineage and a greater serial (409); force replaces the saved state anyway.
func (c *Client) PushState(ctx context.Context, workspace string, state []byte, force bool) error {
	target := c.endpoint([]string{"workspaces", workspace, "state"}, nil)
	if force {
		target += "?force=true"
	}
	resp, err := c.raw(ctx, http.MethodPut, target, state, "application/json")
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// CreateProvisioner registers a provisioner (admin only); the answer carries its token, once.
func (c *Client) CreateProvisioner(ctx context.Context, req CreateProvisionerRequest) (Provisioner, error) {
	var p Provisioner
	err := c.do(ctx, http.MethodPost, []string{"provisioners"}, req, &p)
	return p, err
}

// ListProvisioners lists the registered provisioners (admin only).
func (c *Client) ListProvisioners(ctx context.Context) ([]Provisioner, error) {
	var ps []Provisioner
	err := c.do(ctx, http.MethodGet, []string{"provisioners"}, nil, &ps)
	return ps, err
}

// raw sends a request and returns a 2xx response for the caller to read and close.
func (c *Client) raw(ctx context.Context, method, target string, body []byte, contentType string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, target, err)
	}
	req.Header.Set("User-Agent", "hangar-sdk")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
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
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, readAPIError(resp)
	}
	return resp, nil
}
