package store

import (
	"context"
	"time"

	"github.com/hangar-dev/hangar/internal/workspace"
)

// SSHKey is a public key a user registered to reach their workspaces by SSH through the access
// proxy (docs/decisions.md, "SSH keys"). A key belongs to one user: its fingerprint is unique across
// every user's keys.
type SSHKey struct {
	ID     string
	UserID string
	Name   string
	// Fingerprint is ssh.FingerprintSHA256 of the key ("SHA256:...").
	Fingerprint string
	// PublicKey is the authorized_keys line without options or comment: type and base64.
	PublicKey string
	CreatedAt time.Time
}

// Activity is the latest use of one workspace a proxy saw.
type Activity struct {
	WorkspaceID string
	At          time.Time
}

// SSHKeyStore keeps users' SSH keys.
type SSHKeyStore interface {
	// CreateSSHKey stores k unless its fingerprint is registered already, by anyone (ErrConflict),
	// or its user has maxPerUser keys already (ErrQuota); both checks and the insert happen in one
	// transaction.
	CreateSSHKey(ctx context.Context, k SSHKey, maxPerUser int) error
	// SSHKeys lists a user's keys, oldest first.
	SSHKeys(ctx context.Context, userID string) ([]SSHKey, error)
	// DeleteSSHKey removes the user's key whose id or fingerprint is idOrFingerprint; ErrNotFound when
	// the user has none such (another user's key included).
	DeleteSSHKey(ctx context.Context, userID, idOrFingerprint string) (SSHKey, error)
	// UserBySSHKey finds the user a key of that fingerprint belongs to; ErrNotFound when nobody
	// registered it.
	UserBySSHKey(ctx context.Context, fingerprint string) (workspace.User, SSHKey, error)
}

// ActivityStore keeps when workspaces were last used.
type ActivityStore interface {
	// RecordActivity sets the last_activity_at of each named workspace of the agent to the later of
	// its current value and the item's At (an item naming one workspace several times counts its
	// latest); workspaces of other agents, and unknown ids, are ignored. It returns how many
	// workspaces of the agent it was told about.
	RecordActivity(ctx context.Context, agentID string, items []Activity) (int, error)
}
