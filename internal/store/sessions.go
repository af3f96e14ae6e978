package store

import (
	"context"
	"time"

	"github.com/hangar-dev/hangar/internal/workspace"
)

// Session kinds (docs/decisions.md, "The access proxy").
const (
	// SessionServer is a browser's sign-in on the server (cookie hangar_session).
	SessionServer = "server"
	// SessionCode is a one-time code the server gives a proxy through the browser's redirect.
	SessionCode = "code"
	// SessionWorkspace is what a proxy's cookie (hangar_ws_session) holds: one workspace, one host.
	SessionWorkspace = "workspace"
)

// Session is a sign-in secret, stored by its hash. WorkspaceID and Host are empty for server
// sessions.
type Session struct {
	IDHash []byte
	Kind   string
	UserID string
	// TokenID is the API token the session began with: the session ends when that token is revoked
	// or expires. "" for a session begun without one (an OIDC sign-in), which lives while its user
	// is active. Codes and workspace sessions carry their server session's.
	TokenID     string
	WorkspaceID string
	Host        string
	// ParentHash is the IDHash of the server session a code or workspace session came from (nil
	// for none): DeleteSession of that server session removes them too.
	ParentHash []byte
	CreatedAt  time.Time
	ExpiresAt  time.Time
}

// SessionStore keeps sessions.
type SessionStore interface {
	// CreateSession stores s, and removes the sessions that expired before s.CreatedAt.
	CreateSession(ctx context.Context, s Session) error
	// Session reads the session of that hash and kind with its user, if it has not expired at now,
	// its user is neither deleted nor suspended, and its token (if it has one) is neither revoked nor
	// expired at now; else ErrNotFound.
	Session(ctx context.Context, idHash []byte, kind string, now time.Time) (Session, workspace.User, error)
	// ConsumeSession is Session that also removes the session, so that only one caller gets it
	// (one-time codes).
	ConsumeSession(ctx context.Context, idHash []byte, kind string, now time.Time) (Session, workspace.User, error)
	// DeleteSession removes a session and the sessions whose ParentHash it is (sign-out);
	// removing none is not an error. It counts as a revocation (TokenStore.RevocationSeq).
	DeleteSession(ctx context.Context, idHash []byte) error
}
