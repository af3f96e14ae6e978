package workspace

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
)

// HelperHostKey is the SSH host key of a workspace's helper, derived from its agent's token hash
// (SHA-256 of the token) and the workspace's ID: the server, which keeps the hash, puts the key in
// the workspace's Secret; the access proxy, which holds the agent's token, derives the same key and
// accepts no other from the pod (docs/decisions.md, "The proxy pins the helper's host key"). Each
// workspace has its own key, and nobody without the agent's token or its hash can make one.
func HelperHostKey(agentTokenHash []byte, workspaceID string) ed25519.PrivateKey {
	m := hmac.New(sha256.New, agentTokenHash)
	m.Write([]byte("hangar helper host key v1\x00"))
	m.Write([]byte(workspaceID))
	return ed25519.NewKeyFromSeed(m.Sum(nil))
}
