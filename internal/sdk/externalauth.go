package sdk

import (
	"context"
	"net/http"
	"time"
)

// ExternalAuth is a forge the server is configured with, and the caller's link to it (GET
// /api/v1/external-auth).
type ExternalAuth struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Name string `json:"name"`
	// Linked says whether the caller linked an account at this forge; the fields below are that
	// link's.
	Linked       bool       `json:"linked"`
	AccountLogin string     `json:"account_login,omitempty"`
	AccountEmail string     `json:"account_email,omitempty"`
	LinkedAt     *time.Time `json:"linked_at,omitempty"`
	RefreshedAt  *time.Time `json:"refreshed_at,omitempty"`
	ExpiresAt    *time.Time `json:"expires_at,omitempty"`
	// NeedsRelink is set when the forge refused to refresh the token: git gets nothing from this
	// link until it is linked again. RelinkReason says why (the forge's words).
	NeedsRelink  bool   `json:"needs_relink"`
	RelinkReason string `json:"relink_reason,omitempty"`
	// LastRefreshError is the last refresh's failure, when it failed.
	LastRefreshError string `json:"last_refresh_error,omitempty"`
}

// ExternalAuthList is the answer to GET /api/v1/external-auth.
type ExternalAuthList struct {
	Providers []ExternalAuth `json:"providers"`
}

// ExternalAuthLinkStart is the answer to POST /api/v1/external-auth/{id}/link: the forge's page
// the user opens in a browser signed in to Hangar.
type ExternalAuthLinkStart struct {
	AuthorizeURL string    `json:"authorize_url"`
	ExpiresAt    time.Time `json:"expires_at"`
}

// GitCredentialRequest is the body of POST /api/v1/workspace-agent/git-credentials: what git
// asks a credential helper (git-credential(1)).
type GitCredentialRequest struct {
	Protocol string `json:"protocol"`
	Host     string `json:"host"`
	Path     string `json:"path,omitempty"`
	// Username is the remote URL's user name, when it has one; the answer names the forge's own.
	Username string `json:"username,omitempty"`
}

// GitCredential is its answer: what git sends to the forge.
type GitCredential struct {
	Username string `json:"username"`
	Password string `json:"password"`
	// ExpiresAt is when the password stops working, when the forge said (git's password_expiry_utc).
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// ListExternalAuth lists the configured forges and the caller's links to them.
func (c *Client) ListExternalAuth(ctx context.Context) ([]ExternalAuth, error) {
	var l ExternalAuthList
	err := c.do(ctx, http.MethodGet, []string{"external-auth"}, nil, &l)
	return l.Providers, err
}

// LinkExternalAuth begins the caller's link to a forge.
func (c *Client) LinkExternalAuth(ctx context.Context, id string) (ExternalAuthLinkStart, error) {
	var out ExternalAuthLinkStart
	err := c.do(ctx, http.MethodPost, []string{"external-auth", id, "link"}, nil, &out)
	return out, err
}

// UnlinkExternalAuth forgets the caller's link to a forge.
func (c *Client) UnlinkExternalAuth(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, []string{"external-auth", id}, nil, nil)
}

// GitCredentials asks, with a workspace helper's token, for the credential git needs.
func (c *Client) GitCredentials(ctx context.Context, req GitCredentialRequest) (GitCredential, error) {
	var out GitCredential
	err := c.do(ctx, http.MethodPost, []string{"workspace-agent", "git-credentials"}, req, &out)
	return out, err
}
