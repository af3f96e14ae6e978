package store

import (
	"context"
	"time"

	"github.com/hangar-dev/hangar/internal/workspace"
)

// OIDCSignIn is a sign-in through an OIDC provider, as the server read it from a verified ID token
// (docs/decisions.md, "Sign-in with OIDC").
type OIDCSignIn struct {
	// Issuer and Subject name the identity at the provider: the link to a Hangar user.
	Issuer, Subject string
	// Email is the identity's email as the provider gave it ("" for none); kept for people to read.
	Email string
	// FullName and ProfileEmail are the claims the user's profile takes (name; email when the
	// provider did not say it is unverified), "" for none: SignInOIDC copies each into the
	// profile unless the user set that field themselves (workspace.User.FullNameSet, EmailSet).
	FullName, ProfileEmail string
	// Admin is whether the user is an admin from now on (re-evaluated at every sign-in).
	Admin bool
	// Username is the name a new user should get; SignInOIDC adds "-2", "-3"... when it is taken.
	// It must pass workspace.CheckUsername with room for the suffix.
	Username string
	// UserID and TokenHash are the new user's, used when the identity is not linked yet. The
	// token hash is of a random token nobody knows: an OIDC user has no API token to begin with.
	UserID    string
	TokenHash []byte
	At        time.Time
}

// OIDCStore links users to their identities at OIDC providers.
type OIDCStore interface {
	// SignInOIDC finds the user linked to (Issuer, Subject), sets its admin flag to in.Admin and
	// records the sign-in; or, when none is linked, creates the user (Username made unique) and the
	// link. All in one transaction. created says which. A user it creates is recorded in the same
	// transaction (a user.create entry, method oidc); the sign-in's own entry is written with the
	// session it begins (CreateSession). When the linked user was deleted, it changes nothing and
	// returns ErrNotFound (the identity stays linked to it: a deleted user does not come back as a
	// new one). A suspended user is returned as it is (SuspendedAt set): the caller refuses it.
	SignInOIDC(ctx context.Context, in OIDCSignIn) (u workspace.User, created bool, err error)
}
