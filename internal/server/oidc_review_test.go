package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestOIDCSignInSuspendedOrDeleted: a suspended user signing in through the provider is refused
// with a page that says so, as their token is, and gets no session; a deleted user is refused too,
// and does not come back (neither as itself nor as a new user). Reinstated, the user signs in again.
func TestOIDCSignInSuspendedOrDeleted(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env, p := newOIDCEnv(t, engine)
			signedIn := func(b *oidcBrowser) bool {
				_, body := b.get(env.URL + "/signin")
				return strings.Contains(body, "You are signed in")
			}
			// The first sign-in creates alice-smith.
			if b := newOIDCBrowser(t); true {
				b.signIn(env, p, "sub-alice", "/signin")
				if !signedIn(b) {
					t.Fatal("alice's first sign-in")
				}
			}

			yes, no := true, false
			mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/users/alice-smith", sdk.UpdateUserRequest{Suspended: &yes}, http.StatusOK, nil)
			b := newOIDCBrowser(t)
			resp, body := b.signIn(env, p, "sub-alice", "/signin")
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "alice-smith is suspended") {
				t.Fatalf("a suspended user's sign-in: %s %s", resp.Status, body)
			}
			if signedIn(b) {
				t.Fatal("the suspended user's browser is signed in")
			}
			fails := auditEntries(t, env.Store, audit.Filter{Action: audit.SignIn, Outcome: audit.Failure})
			if len(fails) != 1 || !strings.Contains(fails[0].Error, "suspended") {
				t.Fatalf("the refused sign-in in the audit log: %+v", fails)
			}

			mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/users/alice-smith", sdk.UpdateUserRequest{Suspended: &no}, http.StatusOK, nil)
			b = newOIDCBrowser(t)
			b.signIn(env, p, "sub-alice", "/signin")
			if !signedIn(b) {
				t.Fatal("the reinstated user cannot sign in")
			}

			var users []sdk.User
			mustCall(t, env, env.AdminToken, "GET", "/api/v1/users", nil, http.StatusOK, &users)
			mustCall(t, env, env.AdminToken, "DELETE", "/api/v1/users/alice-smith", nil, http.StatusNoContent, nil)
			b = newOIDCBrowser(t)
			resp, body = b.signIn(env, p, "sub-alice", "/signin")
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "was deleted") {
				t.Fatalf("a deleted user's sign-in: %s %s", resp.Status, body)
			}
			if signedIn(b) {
				t.Fatal("the deleted user's browser is signed in")
			}
			var after []sdk.User
			mustCall(t, env, env.AdminToken, "GET", "/api/v1/users", nil, http.StatusOK, &after)
			if len(after) != len(users)-1 {
				t.Fatalf("users after the deleted user's sign-in: %+v (before the deletion %+v)", after, users)
			}
		})
	}
}
