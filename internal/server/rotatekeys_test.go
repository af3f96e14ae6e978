package server_test

import (
	"net/http"
	"testing"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestRotateTokenRemovesSSHKeys: a reset after a leak (rotate-token) removes the user's SSH keys
// too: whoever held the leaked token may have registered a key of theirs with it, which the access
// proxy would otherwise go on honouring after the reset.
func TestRotateTokenRemovesSSHKeys(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			leaked := createUser(t, env, "bob")
			key, _ := newKey(t, "")
			mustCall(t, env, leaked, "POST", "/api/v1/users/me/ssh-keys",
				sdk.AddSSHKeyRequest{Name: "someone-elses", PublicKey: key}, http.StatusCreated, nil)

			var u sdk.User
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/users/bob/token", nil, http.StatusOK, &u)
			var keys sdk.SSHKeyList
			mustCall(t, env, u.Token, "GET", "/api/v1/users/me/ssh-keys", nil, http.StatusOK, &keys)
			if len(keys.SSHKeys) != 0 {
				t.Fatalf("bob's SSH keys after rotate-token: %+v, want none", keys.SSHKeys)
			}
		})
	}
}
