package protocol

import "time"

// The proxy's SSH side (the seed's L4 path): `hangar proxy` accepts SSH, asks the server whether
// the client may enter the workspace its user name names, and forwards to the helper inside the
// workspace. Both endpoints take the agent's token, as ProxyCheckPath does.
const (
	// ProxySSHCheckPath says whether a public key or a user token may enter a workspace by SSH.
	ProxySSHCheckPath = "/api/v1/proxy/ssh-check"
	// ProxyActivityPath records that workspaces were used (SSH sessions, proxied requests).
	ProxyActivityPath = "/api/v1/proxy/activity"
	// MaxActivityItems bounds one ProxyActivityRequest.
	MaxActivityItems = 1000
)

// ProxySSHCheckRequest asks whether the client of an SSH connection may enter Workspace. Exactly
// one of PublicKey (a key the client proved it holds, as an authorized_keys line) and Token (a
// user's token, given as the SSH password) is set.
type ProxySSHCheckRequest struct {
	// Workspace is the SSH user name: "name" (a workspace of the key's or token's user) or
	// "owner/name" (an admin's way into anyone's workspace, or anyone's into their own).
	Workspace string `json:"workspace"`
	PublicKey string `json:"public_key,omitempty"`
	Token     string `json:"token,omitempty"`
	// ClientAddress is the SSH client's IP address, as in ProxyCheckRequest: a refused token
	// counts against it, and a token from an address over the limit is answered
	// ProxyRateLimited. Public keys are neither counted nor refused so (a key is no guessable
	// secret: the client proves it holds the private half).
	ClientAddress string `json:"client_address,omitempty"`
}

// ProxySSHCheckResponse is the server's decision; refusals are answers (200, allowed false) with
// one of the Proxy* reasons of ProxyCheckResponse.
type ProxySSHCheckResponse struct {
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason,omitempty"`
	User    string `json:"user,omitempty"`
	// Workspace is owner/name; WorkspaceID finds its Service (label hangar.dev/workspace-id).
	Workspace   string `json:"workspace,omitempty"`
	WorkspaceID string `json:"workspace_id,omitempty"`
	// Status is the workspace's actual state, so that the proxy can say "stopped" rather than fail.
	Status string `json:"status,omitempty"`
	// RetryAfter is, with ProxyRateLimited, how many seconds until the address may try again.
	RetryAfter int `json:"retry_after,omitempty"`
}

// Activity kinds.
const (
	ActivitySSH  = "ssh"
	ActivityHTTP = "http"
)

// ProxyActivity is the last use of one workspace the proxy saw since its previous report.
type ProxyActivity struct {
	WorkspaceID string    `json:"workspace_id"`
	Kind        string    `json:"kind"`
	At          time.Time `json:"at"`
}

// ProxyActivityRequest is the body of ProxyActivityPath. The server keeps, per workspace, the
// latest At it was told (never moving it back), for the workspaces of the calling agent only.
type ProxyActivityRequest struct {
	Activity []ProxyActivity `json:"activity"`
}
