package agent

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hangar-dev/hangar/internal/apiclient"
	"github.com/hangar-dev/hangar/internal/protocol"
)

// ServerClient calls the server's agent endpoints with the agent's token.
type ServerClient struct {
	URL   string
	Token string
	HTTP  *http.Client
}

// StatusError is a non-2xx answer of the server.
type StatusError = apiclient.StatusError

func (c *ServerClient) do(ctx context.Context, method, path string, body, out any) error {
	return apiclient.Do(ctx, c.HTTP, c.URL, c.Token, method, path, body, out, 0) // a reconcile answer holds every config it sends: no limit
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
