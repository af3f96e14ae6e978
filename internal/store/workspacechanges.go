package store

import (
	"context"
	"time"

	"github.com/hangar-dev/hangar/internal/workspace"
)

// WorkspaceChangeStore feeds the live workspace list (GET /api/v1/workspaces/events): what changed
// since a cursor, and a wake-up when something may have.
type WorkspaceChangeStore interface {
	// WorkspaceCursor returns the cursor of now: take it before a full list, then ask
	// WorkspaceChanges from it.
	WorkspaceCursor(ctx context.Context) (string, error)
	// WorkspaceChanges returns the workspaces f selects (its OwnerID and Prebuilds; Terminated ones
	// always, a deletion being a change) changed by transactions committed after cursor, reading
	// only those rows, and the cursor to ask from next. A workspace may come twice (a change just
	// before the cursor); none is missed.
	WorkspaceChanges(ctx context.Context, cursor string, f ListFilter) (rows []workspace.Workspace, next string, err error)
	// SubscribeWorkspaces returns a channel that receives a value after a commit that may have
	// changed a workspace as lists show it (any replica's, on Postgres; a wake-all after the
	// listener reconnects), and a function to unsubscribe. Wake-ups coalesce and may be spurious.
	SubscribeWorkspaces() (ch <-chan struct{}, cancel func())
}

// AgentSeenStore records when agents last called the server.
type AgentSeenStore interface {
	// TouchAgent records that the agent called at at (never moving it back).
	TouchAgent(ctx context.Context, agentID string, at time.Time) error
	// AgentsLastSeen returns when each agent that ever called last did, by agent id.
	AgentsLastSeen(ctx context.Context) (map[string]time.Time, error)
}
