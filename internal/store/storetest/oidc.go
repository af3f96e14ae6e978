package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// testOIDC: a first sign-in creates the user and links it by (issuer, subject); the next finds it
// by that link whatever the email says, and sets its admin flag again; usernames are made unique;
// an OIDC session (no token hash) is valid until it expires.
func testOIDC(t *testing.T, s store.Store) {
	ctx := context.Background()
	const iss = "https://idp.example.com"
	var signInAt func(iss, sub, email, name string, admin bool, at time.Time) (workspace.User, bool)
	// An existing user named alice (a token user): the OIDC alice gets alice-2.
	if err := s.CreateUser(ctx, workspace.User{ID: uuid.NewString(), Username: "alice", TokenHash: []byte("tok-alice"), CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	signIn := func(sub, email, name string, admin bool, at time.Time) (workspace.User, bool) {
		t.Helper()
		return signInAt(iss, sub, email, name, admin, at)
	}
	signInAt = func(iss, sub, email, name string, admin bool, at time.Time) (workspace.User, bool) {
		t.Helper()
		u, created, err := s.SignInOIDC(ctx, store.OIDCSignIn{Issuer: iss, Subject: sub, Email: email, Admin: admin, Username: name,
			UserID: uuid.NewString(), TokenHash: []byte(uuid.NewString()), At: at})
		if err != nil {
			t.Fatalf("SignInOIDC(%s): %v", sub, err)
		}
		return u, created
	}
	a, created := signIn("sub-a", "alice@example.com", "alice", false, t0)
	if !created || a.Username != "alice-2" || a.Admin {
		t.Fatalf("first sign-in = %+v, created %v; want a new alice-2, not admin", a, created)
	}
	if got, err := s.UserByUsername(ctx, "alice-2"); err != nil || got.ID != a.ID {
		t.Fatalf("UserByUsername(alice-2) = %+v, %v", got, err)
	}
	// The same subject with another email and a wish for another name: the same user, now admin.
	again, created := signIn("sub-a", "alice@other.example", "someone-else", true, t0.Add(time.Hour))
	if created || again.ID != a.ID || again.Username != "alice-2" || !again.Admin {
		t.Fatalf("second sign-in = %+v, created %v; want the same user, now admin", again, created)
	}
	// Admin is re-evaluated each time: taken away again.
	if again, _ = signIn("sub-a", "alice@other.example", "alice", false, t0.Add(2*time.Hour)); again.Admin {
		t.Fatalf("third sign-in without the admin group: %+v, want not admin", again)
	}
	// Another subject with alice's email is another user: linked by subject, not by email.
	other, created := signIn("sub-b", "alice@example.com", "alice", false, t0)
	if !created || other.ID == a.ID || other.Username != "alice-3" {
		t.Fatalf("another subject with the same email = %+v, created %v; want a new user alice-3", other, created)
	}
	// Another issuer with the same subject is another identity too.
	if elsewhere, created := signInAt("https://other.example.com", "sub-a", "", "bob", false, t0); !created || elsewhere.ID == a.ID || elsewhere.Username != "bob" {
		t.Fatalf("the same subject at another issuer = %+v, created %v; want a new user bob", elsewhere, created)
	}

	// The audit log: a user.create for each first sign-in, in its transaction.
	creates := listAudit(t, s, audit.Filter{Action: audit.UserCreate})
	if len(creates) != 3 || creates[len(creates)-1].Target.Name != "alice-2" || creates[len(creates)-1].Actor.Name != "alice-2" ||
		creates[len(creates)-1].Details["method"] != "oidc" || creates[len(creates)-1].Details["issuer"] != iss {
		t.Fatalf("user.create entries = %+v, want 3, the first for alice-2 with method oidc", creates)
	}

	// Concurrent first sign-ins of one identity: one user, whoever wins (the losers retry, as the
	// server does, and find it).
	var wg sync.WaitGroup
	ids := make([]string, 6)
	for i := range ids {
		wg.Go(func() {
			for try := 0; try < 5; try++ {
				u, _, err := s.SignInOIDC(ctx, store.OIDCSignIn{Issuer: iss, Subject: "sub-race", Username: "racer",
					UserID: uuid.NewString(), TokenHash: []byte(uuid.NewString()), At: t0})
				if errors.Is(err, store.ErrConflict) {
					continue
				}
				if err != nil {
					t.Errorf("SignInOIDC: %v", err)
					return
				}
				ids[i] = u.ID
				return
			}
			t.Errorf("SignInOIDC kept conflicting")
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent first sign-ins made several users: %v", ids)
		}
	}

	// A session without a token hash: valid until it expires, ended by deleting it; a reset of the
	// user's tokens (after a leak) ends it too.
	sess := store.Session{IDHash: []byte("oidc-session"), Kind: store.SessionServer, UserID: a.ID, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	got, u, err := s.Session(ctx, sess.IDHash, store.SessionServer, t0.Add(time.Minute))
	if err != nil || u.ID != a.ID || got.TokenID != "" {
		t.Fatalf("Session(no token) = %+v, %+v, %v", got, u, err)
	}
	if err := s.ResetUserTokens(ctx, a.ID, store.APIToken{ID: "tok-alice-2", UserID: a.ID, Name: "cli", Hash: []byte("a token of alice-2's own"), CreatedAt: t0}, t0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Session(ctx, sess.IDHash, store.SessionServer, t0.Add(time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a session without a token after the user's tokens were reset: %v, want ErrNotFound", err)
	}
	sess.IDHash = []byte("oidc-session-2")
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Session(ctx, sess.IDHash, store.SessionServer, t0.Add(time.Minute)); err != nil {
		t.Fatalf("a session without a token: %v", err)
	}
	if _, _, err := s.Session(ctx, sess.IDHash, store.SessionServer, t0.Add(time.Hour)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an expired session without a token: %v, want ErrNotFound", err)
	}
}
