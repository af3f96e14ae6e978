package store

import (
	"context"
	"time"

	"github.com/hangar-dev/hangar/internal/audit"
)

// AuditStore keeps the audit log (package audit).
//
// The write methods that are actions a person or the automation takes are "audited": when their
// ctx carries a pending entry (audit.From), they insert it, as a success, in their own
// transaction, so that it commits with the action or not at all. They are CreateUser,
// CreateUserWithToken, CreateToken, RevokeToken, ResetUserTokens, SetUserSuspended,
// UpdateUserProfile, DeleteUser, CreateAgent, SetAgentToken, SetAgentConfig, CreateWorkspace, UpdateWorkspace,
// CreateTemplateVersion, SetTemplateLifecycle, PromoteTemplateVersion, CreateBuildWorkspace,
// NewBuild, UpdateBuild, PutBuildState, ClaimPrebuild, CreateProvisioner, SetProvisionerToken,
// CreateSession, CreateSSHKey and DeleteSSHKey. Other writes (logs, heartbeats, reconciles,
// activity) never write a pending entry.
type AuditStore interface {
	// InsertAudit writes one entry (its ID is assigned).
	InsertAudit(ctx context.Context, e audit.Entry) error
	// ListAudit lists the entries f selects, newest (highest ID) first, at most f.Limit
	// (audit.DefaultLimit when 0, at most audit.MaxLimit).
	ListAudit(ctx context.Context, f audit.Filter) ([]audit.Entry, error)
	// PruneAudit deletes at most limit of the oldest entries older than before, and returns how
	// many it deleted.
	PruneAudit(ctx context.Context, before time.Time, limit int) (int, error)
}
