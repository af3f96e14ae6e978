package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// ServerClient calls the server's agent endpoints with the agent's token.
type ServerClient struct {
	URL   string
	Token string
	HTTP  *http.Client
}

// StatusError is a non-2xx answer.
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string { return fmt.Sprintf("server answered %d: %s", e.Code, e.Body) }

func (c *ServerClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.URL, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return &StatusError{Code: resp.StatusCode, Body: strings.TrimSpace(string(b))}
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// Info returns who the agent is, from its token.
func (c *ServerClient) Info(ctx context.Context) (protocol.AgentInfo, error) {
	var out protocol.AgentInfo
	err := c.do(ctx, http.MethodGet, protocol.InfoPath, nil, &out)
	return out, err
}

// Reconcile sends a reconcile request.
func (c *ServerClient) Reconcile(ctx context.Context, req protocol.ReconcileRequest) (protocol.ReconcileResponse, error) {
	var out protocol.ReconcileResponse
	err := c.do(ctx, http.MethodPost, protocol.ReconcilePath, req, &out)
	return out, err
}

// Wait long-polls the server until a workspace of the agent has something for a partial reconcile,
// or the timeout passes.
func (c *ServerClient) Wait(ctx context.Context, timeout time.Duration) (bool, error) {
	var out protocol.WaitResponse
	q := url.Values{"timeout_seconds": {strconv.Itoa(int(timeout.Seconds()))}}
	err := c.do(ctx, http.MethodGet, protocol.WaitPath+"?"+q.Encode(), nil, &out)
	return out.Pending, err
}
