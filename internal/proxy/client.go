package proxy

import (
	"context"
	"net/http"

	"github.com/hangar-dev/hangar/internal/apiclient"
	"github.com/hangar-dev/hangar/internal/protocol"
)

// ServerClient calls the server with the agent's token.
type ServerClient struct {
	URL   string
	Token string
	HTTP  *http.Client
}

// StatusError is a non-2xx answer of the server.
type StatusError = apiclient.StatusError

func (c *ServerClient) do(ctx context.Context, method, path string, body, out any) error {
	return apiclient.Do(ctx, c.HTTP, c.URL, c.Token, method, path, body, out, 1<<20)
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

// SSHCheck asks whether a key or token may enter a workspace by SSH.
func (c *ServerClient) SSHCheck(ctx context.Context, req protocol.ProxySSHCheckRequest) (protocol.ProxySSHCheckResponse, error) {
	var out protocol.ProxySSHCheckResponse
	err := c.do(ctx, http.MethodPost, protocol.ProxySSHCheckPath, req, &out)
	return out, err
}

// Activity reports the workspaces' latest use.
func (c *ServerClient) Activity(ctx context.Context, req protocol.ProxyActivityRequest) error {
	return c.do(ctx, http.MethodPost, protocol.ProxyActivityPath, req, nil)
}
