package workspace

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// KubeHelperTokenPrefix begins the token of a Kubernetes workspace's helper (the helper tokens'
// "hwa_", then the scheme's version).
const KubeHelperTokenPrefix = "hwa_k1_"

// KubeHelperToken is the token of a Kubernetes workspace's helper (docs/decisions.md, "A team's
// repository: the helper of a Kubernetes workspace asks the server"): the workspace's ID and an
// HMAC of it under key, a secret the server is given in a file (never in the database, so that a
// copy of the database cannot make one). The server puts it in the workspace's Secret, and checks it
// by computing it again: nothing is stored, every replica with the key agrees, and it stops working
// when the workspace is deleted (the server checks the workspace at every use).
func KubeHelperToken(key []byte, workspaceID string) string {
	return KubeHelperTokenPrefix + workspaceID + "." + base64.RawURLEncoding.EncodeToString(kubeHelperMAC(key, workspaceID))
}

// VerifyKubeHelperToken returns the workspace ID a token made by KubeHelperToken under key names,
// or false.
func VerifyKubeHelperToken(key []byte, token string) (workspaceID string, ok bool) {
	rest, ok := strings.CutPrefix(token, KubeHelperTokenPrefix)
	if !ok || len(key) == 0 || len(rest) > 128 {
		return "", false
	}
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 {
		return "", false
	}
	id, mac := rest[:i], rest[i+1:]
	// Only the canonical form: Go's decoder skips '\r' and '\n', which would let many strings
	// stand for one token.
	if len(mac) != base64.RawURLEncoding.EncodedLen(sha256.Size) || strings.ContainsFunc(mac, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) {
		return "", false
	}
	got, err := base64.RawURLEncoding.Strict().DecodeString(mac)
	if err != nil || !hmac.Equal(got, kubeHelperMAC(key, id)) {
		return "", false
	}
	return id, true
}

func kubeHelperMAC(key []byte, workspaceID string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("hangar kubernetes helper token v1\x00"))
	m.Write([]byte(workspaceID))
	return m.Sum(nil)
}
