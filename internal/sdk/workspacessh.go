package sdk

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"github.com/coder/websocket"
)

// WorkspaceSSHSubprotocol is the WebSocket subprotocol of DialWorkspaceSSH (protocol's
// WorkspaceSSHSubprotocol; the SDK does not import the server's packages).
const WorkspaceSSHSubprotocol = "hangar-ssh.v1"

// DialWorkspaceSSH opens GET /api/v1/workspaces/{ref}/ssh: a connection, relayed by the server, to
// the helper of a Terraform workspace, on which the caller speaks SSH (the helper asks for no
// credential: the server let the caller in). The connection lives until closed or ctx ends. A
// refusal is an *APIError (409: the helper is not connected).
func (c *Client) DialWorkspaceSSH(ctx context.Context, ref string) (net.Conn, error) {
	target := c.endpoint([]string{"workspaces", ref, "ssh"}, nil)
	h := http.Header{"User-Agent": {"hangar-sdk"}}
	if c.Token != "" {
		h.Set("Authorization", "Bearer "+c.Token)
	}
	ws, resp, err := websocket.Dial(ctx, target, &websocket.DialOptions{HTTPClient: c.HTTP, HTTPHeader: h, Subprotocols: []string{WorkspaceSSHSubprotocol}})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, readAPIError(resp)
		}
		return nil, fmt.Errorf("connect to %s: %w", target, err)
	}
	return websocket.NetConn(ctx, ws, websocket.MessageBinary), nil
}
