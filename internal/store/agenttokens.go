package store

import (
	"context"
	"time"
)

// WorkspaceAgentToken is the token of the helper of a Terraform workspace (docs/decisions.md,
// "Terraform workspaces: the helper connects out"): minted for one build, kept as a hash.
type WorkspaceAgentToken struct {
	// Hash is the SHA-256 of the token.
	Hash        []byte
	WorkspaceID string
	// BuildNumber is the build the token was minted for.
	BuildNumber int
	CreatedAt   time.Time
}

// AgentTokenStore keeps the tokens of Terraform workspaces' helpers.
type AgentTokenStore interface {
	// CreateWorkspaceAgentToken stores t (ErrConflict if the hash is stored already, ErrNotFound
	// if the workspace is not).
	CreateWorkspaceAgentToken(ctx context.Context, t WorkspaceAgentToken) error
	// WorkspaceAgentTokenByHash finds a token by its hash; ErrNotFound when there is none.
	WorkspaceAgentTokenByHash(ctx context.Context, hash []byte) (WorkspaceAgentToken, error)
	// KeepWorkspaceAgentTokens removes the workspace's tokens of builds up to upToBuild (inclusive)
	// whose hash is not in keep, and returns how many it removed. Tokens of later builds stay.
	KeepWorkspaceAgentTokens(ctx context.Context, workspaceID string, upToBuild int, keep [][]byte) (int, error)
	// SetWorkspaceAgentConnection records that the workspace's helper is connected to a replica
	// (replacing any earlier record); ClearWorkspaceAgentConnection removes the record if it is
	// still c (same replica and connection time: not a later connection's); WorkspaceAgentConnection
	// reads it (ErrNotFound: none).
	SetWorkspaceAgentConnection(ctx context.Context, c AgentConnection) error
	ClearWorkspaceAgentConnection(ctx context.Context, c AgentConnection) error
	WorkspaceAgentConnection(ctx context.Context, workspaceID string) (AgentConnection, error)
	// RecordWorkspaceHelperDisconnect records that the workspace's helper's connection ended at
	// at, and why (replacing the record of an earlier end). Workspace reads fill the helper's
	// fields from it and from the connection record. ErrNotFound for no such workspace.
	RecordWorkspaceHelperDisconnect(ctx context.Context, workspaceID string, at time.Time, why string) error
	// RecordWorkspaceActivity sets the workspace's last_activity_at to the later of its value and
	// at (either backend; ErrNotFound for no such workspace).
	RecordWorkspaceActivity(ctx context.Context, workspaceID string, at time.Time) error
}

// AgentConnection is the record of which server replica a Terraform workspace's helper is
// connected to.
type AgentConnection struct {
	WorkspaceID string
	Replica     string
	// RelayURL is that replica's URL as the other replicas reach it, which they relay the
	// workspace's connections to ("": it takes none).
	RelayURL    string
	ConnectedAt time.Time
}
