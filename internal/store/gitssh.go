package store

import (
	"context"
	"time"
)

// GitSSHKey is a user's git SSH key (internal/gitssh; docs/decisions.md, "A team's repository: a
// git SSH key per user"): the user adds PublicKey to their forge; PrivateKey is sealed under the
// external auth key KeyID names and is never stored in the clear.
type GitSSHKey struct {
	UserID string
	// PublicKey is the authorized_keys form (type and base64); Fingerprint is
	// ssh.FingerprintSHA256 of it.
	PublicKey, Fingerprint string
	KeyID                  string
	PrivateKey             []byte
	CreatedAt              time.Time
}

// GitSSHKeyStore keeps users' git SSH keys, one per user.
type GitSSHKeyStore interface {
	// CreateGitSSHKey stores the user's first key; ErrConflict when the user has one already
	// (another replica made it first: read that one).
	CreateGitSSHKey(ctx context.Context, k GitSSHKey) error
	// ReplaceGitSSHKey stores k as the user's key, replacing any (a rotation), with the pending audit entry
	// of the context in the same transaction.
	ReplaceGitSSHKey(ctx context.Context, k GitSSHKey) error
	// GitSSHKey reads the user's key (ErrNotFound when none was made yet).
	GitSSHKey(ctx context.Context, userID string) (GitSSHKey, error)
}
