package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// testProfile: a user's profile is changed field by field (nil leaves, "" clears) and read back by
// every way a user is read (by name, token, session, SSH key, list) and with each workspace of
// theirs; an OIDC sign-in fills the name and email the user did not set, and leaves the ones they
// did; the change is audited in its transaction.
func testProfile(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "prof")
	str := func(v string) *string { return &v }

	u, err := s.UpdateUserProfile(ctx, f.User.ID, workspace.ProfileChange{FullName: str("Ada Lovelace"), DotfilesRepo: str("https://git.example.com/ada/dots.git#main")})
	if err != nil {
		t.Fatal(err)
	}
	want := func(u workspace.User, full, email, dots string, fullSet, emailSet bool) {
		t.Helper()
		if u.FullName != full || u.Email != email || u.DotfilesRepo != dots || u.FullNameSet != fullSet || u.EmailSet != emailSet {
			t.Fatalf("profile = %q %q %q set %v %v; want %q %q %q set %v %v", u.FullName, u.Email, u.DotfilesRepo, u.FullNameSet, u.EmailSet,
				full, email, dots, fullSet, emailSet)
		}
	}
	want(u, "Ada Lovelace", "", "https://git.example.com/ada/dots.git#main", true, false)
	got, err := s.UserByUsername(ctx, f.User.Username)
	if err != nil {
		t.Fatal(err)
	}
	want(got, "Ada Lovelace", "", "https://git.example.com/ada/dots.git#main", true, false)
	// Email only: the rest stays.
	if u, err = s.UpdateUserProfile(ctx, f.User.ID, workspace.ProfileChange{Email: str("ada@example.com")}); err != nil {
		t.Fatal(err)
	}
	want(u, "Ada Lovelace", "ada@example.com", "https://git.example.com/ada/dots.git#main", true, true)
	if _, tu, err := s.TokenByHash(ctx, f.User.TokenHash); err != nil {
		t.Fatal(err)
	} else {
		want(tu, "Ada Lovelace", "ada@example.com", "https://git.example.com/ada/dots.git#main", true, true)
	}
	list, err := s.ListUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, lu := range list {
		if lu.ID == f.User.ID {
			want(lu, "Ada Lovelace", "ada@example.com", "https://git.example.com/ada/dots.git#main", true, true)
		}
	}
	// A workspace of theirs carries the owner's profile (the generator reads it there).
	ws := f.Workspace("prof-ws")
	f.Create(t, s, ws)
	rw, err := s.Workspace(ctx, store.WorkspaceRef{ID: ws.ID})
	if err != nil {
		t.Fatal(err)
	}
	if rw.OwnerFullName != "Ada Lovelace" || rw.OwnerEmail != "ada@example.com" || rw.OwnerDotfilesRepo != "https://git.example.com/ada/dots.git#main" {
		t.Fatalf("workspace's owner profile = %q %q %q", rw.OwnerFullName, rw.OwnerEmail, rw.OwnerDotfilesRepo)
	}
	// Clearing the dotfiles and the email: the email is the sign-ins' again.
	if u, err = s.UpdateUserProfile(ctx, f.User.ID, workspace.ProfileChange{Email: str(""), DotfilesRepo: str("")}); err != nil {
		t.Fatal(err)
	}
	want(u, "Ada Lovelace", "", "", true, false)
	if _, err := s.UpdateUserProfile(ctx, uuid.NewString(), workspace.ProfileChange{FullName: str("x")}); err == nil {
		t.Fatal("UpdateUserProfile of no user succeeded")
	}

	// OIDC: a first sign-in fills both; a later one refreshes what the user did not set.
	const iss = "https://idp.example.com/profile"
	signIn := func(full, email string) workspace.User {
		t.Helper()
		u, _, err := s.SignInOIDC(ctx, store.OIDCSignIn{Issuer: iss, Subject: "sub-grace", Email: email, FullName: full, ProfileEmail: email,
			Username: "grace", UserID: uuid.NewString(), TokenHash: []byte(uuid.NewString()), At: t0})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	g := signIn("Grace Hopper", "grace@example.com")
	want(g, "Grace Hopper", "grace@example.com", "", false, false)
	g = signIn("Grace B. Hopper", "grace@navy.example")
	want(g, "Grace B. Hopper", "grace@navy.example", "", false, false)
	// She sets her name: the next sign-in keeps it, and still refreshes the email.
	if _, err := s.UpdateUserProfile(ctx, g.ID, workspace.ProfileChange{FullName: str("Amazing Grace")}); err != nil {
		t.Fatal(err)
	}
	g = signIn("Grace Hopper", "grace@example.com")
	want(g, "Amazing Grace", "grace@example.com", "", true, false)
	if got, _ := s.UserByUsername(ctx, g.Username); got.FullName != "Amazing Grace" || got.Email != "grace@example.com" {
		t.Fatalf("after the sign-in the store has %q %q", got.FullName, got.Email)
	}
	// Cleared, the name is the provider's again at the next sign-in.
	if _, err := s.UpdateUserProfile(ctx, g.ID, workspace.ProfileChange{FullName: str("")}); err != nil {
		t.Fatal(err)
	}
	want(signIn("Grace Hopper", "grace@example.com"), "Grace Hopper", "grace@example.com", "", false, false)

	// Audited in its transaction.
	actx, _ := (&audit.Recorder{W: s, Now: func() time.Time { return t0 }}).Begin(ctx, audit.Actor{ID: f.User.ID, Name: f.User.Username}, audit.UserProfile,
		audit.Target{Kind: audit.KindUser, ID: f.User.ID, Name: f.User.Username})
	if _, err := s.UpdateUserProfile(actx, f.User.ID, workspace.ProfileChange{FullName: str("A. L.")}); err != nil {
		t.Fatal(err)
	}
	if e := listAudit(t, s, audit.Filter{Action: audit.UserProfile}); len(e) != 1 || e[0].Target.Name != f.User.Username {
		t.Fatalf("user.profile entries = %+v, want one for %s", e, f.User.Username)
	}
}
