package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// ServerClient calls the server with the agent's token.
type ServerClient struct {
	URL   string
	Token string
	HTTP  *http.Client
}

// StatusError is a non-2xx answer of the server.
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
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out)
}

// Info returns who the agent is.
func (c *ServerClient) Info(ctx context.Context) (protocol.AgentInfo, error) {
	var out protocol.AgentInfo
	err := c.do(ctx, http.MethodGet, protocol.InfoPath, nil, &out)
	return out, err
}

// Check asks whether a session or token may enter a host.
func (c *ServerClient) Check(ctx context.Context, req protocol.ProxyCheckRequest) (protocol.ProxyCheckResponse, error) {
	var out protocol.ProxyCheckResponse
	err := c.do(ctx, http.MethodPost, protocol.ProxyCheckPath, req, &out)
	return out, err
}

// Exchange turns a one-time code into a workspace session.
func (c *ServerClient) Exchange(ctx context.Context, req protocol.ProxyExchangeRequest) (protocol.ProxyExchangeResponse, error) {
	var out protocol.ProxyExchangeResponse
	err := c.do(ctx, http.MethodPost, protocol.ProxyExchangePath, req, &out)
	return out, err
}
