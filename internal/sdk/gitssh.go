package sdk

import (
	"context"
	"net/http"
	"time"
)

// GitSSHKey is a user's git SSH key's public half (GET /api/v1/users/me/gitssh): the user adds
// PublicKey to their forge; workspaces' git signs with it through the server.
type GitSSHKey struct {
	// PublicKey is an authorized_keys line: "ssh-ed25519 BASE64 hangar:USERNAME".
	PublicKey   string    `json:"public_key"`
	Fingerprint string    `json:"fingerprint"`
	CreatedAt   time.Time `json:"created_at"`
}

// WorkspaceGitSSH is the answer to a workspace's helper (GET /api/v1/workspace-agent/gitssh): the
// owner's key, and the host keys of the forges' SSH hosts, which the workspace's ssh checks.
type WorkspaceGitSSH struct {
	GitSSHKey
	// KnownHosts is known_hosts lines (ssh's format), from the forges' ssh_known_hosts.
	KnownHosts string `json:"known_hosts,omitempty"`
}

// GitSSHSignRequest is the body of POST /api/v1/workspace-agent/gitssh/sign: what an SSH client
// asked the workspace's agent to sign, and with which key (the SSH wire format of the public key).
type GitSSHSignRequest struct {
	PublicKey []byte `json:"public_key,omitempty"`
	Data      []byte `json:"data"`
}

// GitSSHSignature is its answer: an SSH signature (RFC 4253 section 6.6).
type GitSSHSignature struct {
	Format string `json:"format"`
	Blob   []byte `json:"blob"`
}

// GitSSHKey reads the caller's git SSH key, which the server makes on first need.
func (c *Client) GitSSHKey(ctx context.Context) (GitSSHKey, error) {
	var out GitSSHKey
	err := c.do(ctx, http.MethodGet, []string{"users", "me", "gitssh"}, nil, &out)
	return out, err
}

// RotateGitSSHKey gives the caller a new git SSH key.
func (c *Client) RotateGitSSHKey(ctx context.Context) (GitSSHKey, error) {
	var out GitSSHKey
	err := c.do(ctx, http.MethodPost, []string{"users", "me", "gitssh", "rotate"}, nil, &out)
	return out, err
}
