package store

import (
	"context"
	"time"
)

// ExternalAuthLink is a user's link to their account at a forge the admin configured
// (internal/externalauth; docs/decisions.md, "Forge identities: external auth (issue 22)").
type ExternalAuthLink struct {
	UserID, ProviderID string
	// KeyID names the key that sealed AccessToken and RefreshToken (AES-256-GCM); the store never
	// sees a token in the clear. RefreshToken is nil when the forge gave none.
	KeyID                     string
	AccessToken, RefreshToken []byte
	// ExpiresAt is when the access token expires (nil: the forge said it does not).
	ExpiresAt *time.Time
	// AccountLogin and AccountEmail are the forge account's, as its user API gave them.
	AccountLogin, AccountEmail string
	LinkedAt                   time.Time
	RefreshedAt                *time.Time
	// RefreshError is the last refresh's failure ("" after a success); RelinkReason is set when the
	// forge refused the refresh token: no token is handed out until the user links again.
	RefreshError, RelinkReason string
	// RefreshClaimedUntil is set while a replica refreshes the token (a claim that lapses then):
	// only the claimant sends the refresh token to the forge.
	RefreshClaimedUntil *time.Time
	// Version is bumped by every write; UpdateExternalAuthLink compares it.
	Version int64
}

// ExternalAuthState is a link in progress: the state the browser carries to the forge and back
// (kept as its SHA-256), the user who began it and the PKCE verifier.
type ExternalAuthState struct {
	StateHash    []byte
	UserID       string
	ProviderID   string
	CodeVerifier string
	ExpiresAt    time.Time
}

// ExternalAuthStore keeps the links and the links in progress.
type ExternalAuthStore interface {
	// PutExternalAuthLink stores a new link, or replaces the user's link to that forge (a link
	// again), and returns it with its new version.
	PutExternalAuthLink(ctx context.Context, l ExternalAuthLink) (ExternalAuthLink, error)
	// ExternalAuthLink reads one link (ErrNotFound when none).
	ExternalAuthLink(ctx context.Context, userID, providerID string) (ExternalAuthLink, error)
	// ExternalAuthLinks lists a user's links, by provider id.
	ExternalAuthLinks(ctx context.Context, userID string) ([]ExternalAuthLink, error)
	// UpdateExternalAuthLink writes l's tokens, expiry, refresh outcome and claim if the stored link's
	// version is still l.Version (compare-and-swap), and returns it with its new version. Another
	// write since: ErrConflict; unlinked since: ErrNotFound.
	UpdateExternalAuthLink(ctx context.Context, l ExternalAuthLink) (ExternalAuthLink, error)
	// DeleteExternalAuthLink unlinks (ErrNotFound when there was no link).
	DeleteExternalAuthLink(ctx context.Context, userID, providerID string) error
	// CreateExternalAuthState records a link in progress, and deletes those expired by then.
	CreateExternalAuthState(ctx context.Context, st ExternalAuthState, now time.Time) error
	// TakeExternalAuthState deletes the state with that hash and returns it: once. A state expired
	// by now is deleted and ErrNotFound, as an unknown one.
	TakeExternalAuthState(ctx context.Context, stateHash []byte, now time.Time) (ExternalAuthState, error)
}
