package workspace

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

func TestHelperHostKey(t *testing.T) {
	h := sha256.Sum256([]byte("hga_token"))
	a := HelperHostKey(h[:], "ws-1")
	if !bytes.Equal(a, HelperHostKey(h[:], "ws-1")) {
		t.Error("the same inputs give another key")
	}
	if bytes.Equal(a, HelperHostKey(h[:], "ws-2")) {
		t.Error("two workspaces share a key")
	}
	other := sha256.Sum256([]byte("hga_other"))
	if bytes.Equal(a, HelperHostKey(other[:], "ws-1")) {
		t.Error("two agents' tokens give one key")
	}
	// Pinned: a change of derivation would lock every running workspace out of the proxy.
	if got := hex.EncodeToString(a.Public().(ed25519.PublicKey)); got != pinnedHostKey {
		t.Errorf("public key %s, want %s", got, pinnedHostKey)
	}
}

// pinnedHostKey is HelperHostKey(sha256("hga_token"), "ws-1")'s public key.
const pinnedHostKey = "c38bd84641649a859dd1024402ff5d5c8fb5bc1389bccbfd8558b43671144449"
