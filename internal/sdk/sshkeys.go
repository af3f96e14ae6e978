package sdk

import (
	"context"
	"net/http"
	"time"
)

// SSHKey is a public key a user registered to reach their workspaces by SSH through the access
// proxy. A key belongs to one user: the proxy finds the user by the key's fingerprint.
type SSHKey struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Fingerprint is the key's SHA-256 fingerprint as `ssh-keygen -l` prints it: "SHA256:...".
	Fingerprint string `json:"fingerprint"`
	// PublicKey is the key in authorized_keys form, without options or comment.
	PublicKey string    `json:"public_key"`
	CreatedAt time.Time `json:"created_at"`
}

// SSHKeyList is the answer to GET /api/v1/users/me/ssh-keys.
type SSHKeyList struct {
	SSHKeys []SSHKey `json:"ssh_keys"`
}

// AddSSHKeyRequest is the body of POST /api/v1/users/me/ssh-keys. PublicKey is one key in
// authorized_keys form (the content of a .pub file); Name defaults to the key's comment, else its
// type.
type AddSSHKeyRequest struct {
	Name      string `json:"name,omitempty"`
	PublicKey string `json:"public_key"`
}

// ListSSHKeys lists the caller's SSH keys, oldest first.
func (c *Client) ListSSHKeys(ctx context.Context) ([]SSHKey, error) {
	var l SSHKeyList
	err := c.do(ctx, http.MethodGet, []string{"users", "me", "ssh-keys"}, nil, &l)
	return l.SSHKeys, err
}

// AddSSHKey registers an SSH key for the caller.
func (c *Client) AddSSHKey(ctx context.Context, req AddSSHKeyRequest) (SSHKey, error) {
	var k SSHKey
	err := c.do(ctx, http.MethodPost, []string{"users", "me", "ssh-keys"}, req, &k)
	return k, err
}

// RemoveSSHKey removes one of the caller's SSH keys, named by its id or its fingerprint.
func (c *Client) RemoveSSHKey(ctx context.Context, key string) error {
	return c.do(ctx, http.MethodDelete, []string{"users", "me", "ssh-keys", key}, nil, nil)
}
