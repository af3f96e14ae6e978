package sdk

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Token statuses.
const (
	TokenActive  = "active"
	TokenExpired = "expired"
	TokenRevoked = "revoked"
)

// Token is a user's API token. Token (the secret) is set only in the answer to its creation.
type Token struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	User       string     `json:"user"`
	Token      string     `json:"token,omitempty"`
	Status     string     `json:"status"` // TokenActive, TokenExpired or TokenRevoked
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"` // null: never
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
}

// CreateTokenRequest is the body of POST /api/v1/tokens: a token for the caller.
type CreateTokenRequest struct {
	Name string `json:"name"`
	// LifetimeSeconds is how long the token lives (absent or 0: the server's default, 30 days unless
	// configured; at most the server's maximum).
	LifetimeSeconds int64 `json:"lifetime_seconds,omitempty"`
}

// UpdateUserRequest is the body of PATCH /api/v1/users/{username} (admin only).
type UpdateUserRequest struct {
	// Suspended suspends (true) or reinstates (false) the user; absent changes nothing.
	Suspended *bool `json:"suspended,omitempty"`
}

// CreateToken creates a token for the caller; the answer carries the secret, shown only once.
func (c *Client) CreateToken(ctx context.Context, req CreateTokenRequest) (Token, error) {
	var t Token
	err := c.do(ctx, http.MethodPost, []string{"tokens"}, req, &t)
	return t, err
}

// ListTokens lists the caller's tokens, or user's ("": the caller; another user: admin only).
func (c *Client) ListTokens(ctx context.Context, user string) ([]Token, error) {
	var out []Token
	err := c.doQuery(ctx, http.MethodGet, []string{"tokens"}, userQuery(user), nil, &out)
	return out, err
}

// RevokeToken revokes a token by id or name, the caller's or user's (admin only).
func (c *Client) RevokeToken(ctx context.Context, user, idOrName string) (Token, error) {
	var t Token
	err := c.doQuery(ctx, http.MethodDelete, []string{"tokens", idOrName}, userQuery(user), nil, &t)
	return t, err
}

func userQuery(user string) url.Values {
	if user == "" {
		return nil
	}
	return url.Values{"user": {user}}
}

// ListUsers lists the users (admin only).
func (c *Client) ListUsers(ctx context.Context) ([]User, error) {
	var out []User
	err := c.do(ctx, http.MethodGet, []string{"users"}, nil, &out)
	return out, err
}

// UpdateUser suspends or reinstates a user (admin only).
func (c *Client) UpdateUser(ctx context.Context, username string, req UpdateUserRequest) (User, error) {
	var u User
	err := c.do(ctx, http.MethodPatch, []string{"users", username}, req, &u)
	return u, err
}

// DeleteUser deletes a user (admin only); refused while the user owns workspaces.
func (c *Client) DeleteUser(ctx context.Context, username string) error {
	return c.do(ctx, http.MethodDelete, []string{"users", username}, nil, nil)
}

// UpdateAgent changes fields of an agent's config (admin only): cfg holds only the fields to
// change, as in the config of CreateAgentRequest.
func (c *Client) UpdateAgent(ctx context.Context, name string, req UpdateAgentRequest) (Agent, error) {
	var a Agent
	err := c.do(ctx, http.MethodPatch, []string{"agents", name}, req, &a)
	return a, err
}

// UpdateAgentRequest is the body of PATCH /api/v1/agents/{name}.
type UpdateAgentRequest struct {
	// Config holds the config fields to change (a JSON object; fields absent are kept, null resets a
	// field to its default).
	Config map[string]any `json:"config"`
}

// RotateAgentToken gives an agent a new token (admin only; the old one stops at once), or, with
// revoke, none: the agent is refused until its token is rotated.
func (c *Client) RotateAgentToken(ctx context.Context, name string, revoke bool) (Agent, error) {
	var a Agent
	method := http.MethodPost
	if revoke {
		method = http.MethodDelete
	}
	err := c.do(ctx, method, []string{"agents", name, "token"}, nil, &a)
	return a, err
}

// RotateProvisionerToken is RotateAgentToken for a provisioner.
func (c *Client) RotateProvisionerToken(ctx context.Context, name string, revoke bool) (Provisioner, error) {
	var p Provisioner
	method := http.MethodPost
	if revoke {
		method = http.MethodDelete
	}
	err := c.do(ctx, method, []string{"provisioners", name, "token"}, nil, &p)
	return p, err
}
