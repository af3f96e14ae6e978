package store

import (
	"context"
	"time"

	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// APIToken is a user's API token (docs/decisions.md, "API tokens"), kept by its SHA-256 only.
type APIToken struct {
	ID     string
	UserID string
	// Name is unique among the user's tokens that are not revoked.
	Name      string
	Hash      []byte
	CreatedAt time.Time
	// ExpiresAt is nil for a token that never expires (the bootstrap admin's, and those from
	// before migration 16).
	ExpiresAt  *time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
}

// Expired reports whether t has expired at now.
func (t APIToken) Expired(now time.Time) bool { return t.ExpiresAt != nil && !now.Before(*t.ExpiresAt) }

// Errors of the user and token writes.
var (
	// ErrLastAdmin: the write would leave no active admin.
	ErrLastAdmin = errs.New(errs.Conflict, "it would leave no active admin")
	// ErrOwnsWorkspaces: a user who owns workspaces that are not Terminated cannot be deleted.
	ErrOwnsWorkspaces = errs.New(errs.Conflict, "the user owns workspaces that are not deleted")
)

// TokenStore keeps users' API tokens, and the users' own state (suspended, deleted).
type TokenStore interface {
	// CreateUserWithToken creates u and its first token t (t.UserID is set to u.ID) in one
	// transaction (audited). CreateUser(u) is CreateUserWithToken with a token named "initial"
	// without expiry whose hash is u.TokenHash (none when it is empty).
	CreateUserWithToken(ctx context.Context, u workspace.User, t APIToken) error
	// CreateToken stores t (audited); ErrConflict when the user has a token of that name that is
	// not revoked, ErrNotFound when the user does not exist or is deleted.
	CreateToken(ctx context.Context, t APIToken) error
	// TokenByHash finds a token, whatever its state, with its user; ErrNotFound when there is no
	// such token or its user is deleted. Whether it may be used (not revoked, not expired, user not
	// suspended) is the caller's rule.
	TokenByHash(ctx context.Context, hash []byte) (APIToken, workspace.User, error)
	// ListTokens lists a user's tokens, revoked ones included, newest first.
	ListTokens(ctx context.Context, userID string) ([]APIToken, error)
	// RevokeToken revokes the user's token whose id is ref, or else its token named ref that is
	// not revoked (audited). Revoking a revoked token changes nothing and is no error. ErrNotFound:
	// none. The sessions begun with it end with it.
	RevokeToken(ctx context.Context, userID, ref string, at time.Time) (APIToken, error)
	// ResetUserTokens revokes every token of the user, removes every session of the user (those
	// begun without a token, OIDC sign-ins, too) and every SSH key of the user (one may have been
	// registered with a leaked token), and stores t as its only live one (audited): the old tokens,
	// sessions and keys stop working at once. It counts as a revocation (RevocationSeq).
	ResetUserTokens(ctx context.Context, userID string, t APIToken, at time.Time) error
	// TouchToken records a use of the token at at, when the last one recorded is older than
	// every (so that a busy token costs a write per minute, not per request).
	TouchToken(ctx context.Context, t APIToken, at time.Time, every time.Duration) error

	// ListUsers lists the users who are not deleted (system users never), by name.
	ListUsers(ctx context.Context) ([]workspace.User, error)
	// SetUserSuspended suspends (at set) or reinstates (at nil) a user (audited). Suspending the
	// last active admin is ErrLastAdmin.
	SetUserSuspended(ctx context.Context, userID string, at *time.Time) (workspace.User, error)
	// UpdateUserProfile applies a user's change of their own profile (audited) and returns the
	// user as changed. A full name or email set to a value is marked set by the user (OIDC
	// sign-ins leave it); one cleared is handed back to the sign-ins. The caller validated c.
	UpdateUserProfile(ctx context.Context, userID string, c workspace.ProfileChange) (workspace.User, error)
	// DeleteUser marks the user deleted (its name stays taken), revokes its tokens and removes its
	// sessions, SSH keys and forge links, their tokens with them (audited). ErrOwnsWorkspaces (naming them) while it owns workspaces
	// that are not Terminated; ErrLastAdmin for the last active admin.
	DeleteUser(ctx context.Context, userID string, at time.Time) error

	// SetAgentToken replaces an agent's token hash (rotation, or revocation with a hash no token
	// has), audited; SetAgentConfig replaces its config (audited). ErrNotFound: no such agent.
	SetAgentToken(ctx context.Context, agentID string, hash []byte, at time.Time) error
	SetAgentConfig(ctx context.Context, agentID string, cfg workspace.AgentConfig, at time.Time) (workspace.Agent, error)
	// SetProvisionerToken replaces a provisioner's token hash (audited); it counts as a revocation
	// (RevocationSeq). ErrNotFound: none.
	SetProvisionerToken(ctx context.Context, name string, hash []byte) (Provisioner, error)

	// RevocationSeq is the revocation counter: every write that takes access away (a token revoked
	// or reset, a user suspended or deleted, an SSH key removed, a sign-out, an agent's token
	// replaced) increments it in its transaction. SubscribeRevocations wakes after such a commit
	// (on Postgres, any replica's); like SubscribeAgent it coalesces and may wake spuriously.
	RevocationSeq(ctx context.Context) (int64, error)
	SubscribeRevocations() (ch <-chan struct{}, cancel func())
}
