package server

import (
	"errors"
	"net/http"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/audit"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// BootstrapTokenName and InitialTokenName name the tokens made with a user: the bootstrap admin's
// (in <data-dir>/admin-token, without expiry) and the one `hangar users create` and
// `users rotate-token` hand out (with the default lifetime).
const (
	BootstrapTokenName = "admin-token"
	InitialTokenName   = "initial"
)

func (s *Server) me(w http.ResponseWriter, r *http.Request, u workspace.User) error {
	out := toUser(u, "")
	if t, ok := requestToken(r.Context()); ok {
		ct := toToken(t, u.Username, s.clock.Now())
		out.CurrentToken = &ct
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// updateProfile serves PATCH /api/v1/users/me: the caller changes their own profile (every field
// checked, each failure named, before anything is written).
func (s *Server) updateProfile(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	var req sdk.UpdateProfileRequest
	if err := decodeJSON(w, r, sdk.MaxBodyBytes, &req); err != nil {
		return err
	}
	defer s.audit(&r, u, audit.UserProfile, audit.Target{Kind: audit.KindUser, ID: u.ID, Name: u.Username})(&err)
	v := &workspace.ValidationError{}
	var changed []string
	for _, f := range []struct {
		name  string
		value *string
		check func(string) string
	}{
		{"full_name", req.FullName, workspace.CheckFullName},
		{"email", req.Email, workspace.CheckEmail},
		{"dotfiles_repo", req.DotfilesRepo, workspace.CheckDotfilesRepo},
	} {
		if f.value == nil {
			continue
		}
		changed = append(changed, f.name)
		if msg := f.check(*f.value); msg != "" {
			v.Add(f.name, "%s", msg)
		}
	}
	if err := v.Err(); err != nil {
		return err
	}
	if len(changed) == 0 {
		return errBadRequest("nothing to change: give at least one of full_name, email and dotfiles_repo")
	}
	audit.From(r.Context()).Set("fields", changed)
	u, err = s.store.UpdateUserProfile(r.Context(), u.ID, workspace.ProfileChange{FullName: req.FullName, Email: req.Email, DotfilesRepo: req.DotfilesRepo})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toUser(u, ""))
	return nil
}

// initialToken is a new user's first token, or a user's token after a reset: named
// InitialTokenName, with the default lifetime.
func (s *Server) initialToken() (string, store.APIToken) {
	now := s.clock.Now()
	expires := now.Add(min(s.tokenDefault, s.tokenMax))
	secret := NewToken(userTokenPrefix)
	return secret, store.APIToken{ID: uuid.NewString(), Name: InitialTokenName, Hash: HashToken(secret), CreatedAt: now, ExpiresAt: &expires}
}

func (s *Server) createUser(w http.ResponseWriter, r *http.Request, caller workspace.User) (err error) {
	var req sdk.CreateUserRequest
	if err := decodeJSON(w, r, sdk.MaxBodyBytes, &req); err != nil {
		return err
	}
	defer s.audit(&r, caller, audit.UserCreate, audit.Target{Kind: audit.KindUser, Name: req.Username})(&err)
	audit.From(r.Context()).Set("admin", req.Admin)
	v := &workspace.ValidationError{}
	if msg := workspace.CheckUsername(req.Username); msg != "" {
		v.Add("username", "%s", msg)
	}
	if err := v.Err(); err != nil {
		return err
	}
	token, t := s.initialToken()
	u := workspace.User{ID: uuid.NewString(), Username: req.Username, Admin: req.Admin, CreatedAt: s.clock.Now()}
	audit.From(r.Context()).SetTarget(audit.Target{Kind: audit.KindUser, ID: u.ID, Name: u.Username})
	if err := s.store.CreateUserWithToken(r.Context(), u, t); err != nil {
		return err
	}
	s.log.Info("user created", "user", u.Username, "admin", u.Admin)
	out := toUser(u, token)
	out.TokenExpiresAt = t.ExpiresAt
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// rotateToken serves POST /api/v1/users/{username}/token: every token of the user is revoked and
// one new token (named "initial", with the default lifetime) is given (an admin for anyone, a user
// for itself): a reset after a leak. The old tokens stop working at once, and with them every
// browser and workspace session of the user, those begun without a token (OIDC) too, and the
// user's SSH keys (one may have been registered with a leaked token); the revocation counter moves,
// so that open streams, SSH connections and proxies check again at once.
func (s *Server) rotateToken(w http.ResponseWriter, r *http.Request, caller workspace.User) (err error) {
	name := r.PathValue("username")
	if name == "me" {
		name = caller.Username
	}
	defer s.audit(&r, caller, audit.UserToken, audit.Target{Kind: audit.KindUser, Name: name})(&err)
	if !caller.Admin && name != caller.Username {
		return errForbidden("only an admin may give another user a new token")
	}
	u, err := s.store.UserByUsername(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		return errNotFound("no user %q", name)
	} else if err != nil {
		return err
	}
	audit.From(r.Context()).SetTarget(audit.Target{Kind: audit.KindUser, ID: u.ID, Name: u.Username})
	token, t := s.initialToken()
	if u.ID == caller.ID {
		// A user's own reset mints its new token with the request's credential: not past that
		// credential's token (revocation_credentials.go). An admin's reset of another user is not
		// bound by the admin's token, as the user it creates is not.
		expires, cappedBy, err := s.capToMinter(r, caller, *t.ExpiresAt, 0)
		if err != nil {
			return err
		}
		t.ExpiresAt = &expires
		if cappedBy != "" {
			audit.From(r.Context()).Set("capped_by", cappedBy)
		}
	}
	if err := s.store.ResetUserTokens(r.Context(), u.ID, t, t.CreatedAt); err != nil {
		return err
	}
	s.log.Info("user tokens reset", "user", u.Username, "by", caller.Username)
	out := toUser(u, token)
	out.TokenExpiresAt = t.ExpiresAt
	writeJSON(w, http.StatusOK, out)
	return nil
}
