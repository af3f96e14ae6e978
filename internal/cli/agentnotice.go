package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/internal/sdk"
)

// agentNotice says why a --wait on a Kubernetes workspace may never end: its agent has never
// connected to the server, or is not connected now. Empty when the agent is connected, when the
// workspace is not the agent's (terraform), or when the server cannot tell (an older server, an
// error: the wait goes on as before). Users may list agents, so this needs no admin.
func (a *app) agentNotice(ctx context.Context, c *sdk.Client, ws sdk.Workspace) string {
	if ws.Backend == "terraform" || ws.Agent == "" {
		return ""
	}
	agents, err := c.ListAgents(ctx)
	if err != nil {
		return ""
	}
	for _, ag := range agents {
		if ag.Name != ws.Agent || ag.Connected == nil || *ag.Connected {
			continue
		}
		if ag.LastSeenAt == nil {
			return fmt.Sprintf("agent %s has never connected to this server: nothing happens to workspace %s until 'hangar agent' runs with %s's token", ag.Name, ws.Name, ag.Name)
		}
		return fmt.Sprintf("agent %s is not connected (last seen %s): nothing happens to workspace %s until it is back", ag.Name, a.formatTime(*ag.LastSeenAt), ws.Name)
	}
	return ""
}

// agentNoticeAfter is agentNotice once ctx has ended (a --wait that timed out): it asks with a
// bound of its own.
func (a *app) agentNoticeAfter(ctx context.Context, c *sdk.Client, ws sdk.Workspace) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return a.agentNotice(ctx, c, ws)
}
