package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// API tokens per user (docs/decisions.md, "API tokens"): created with a name and a lifetime,
// listed without their secret, revoked by id or name. Every credential a user presents (a bearer
// token, the sign-in form's token, a token as an SSH password) is checked by userByToken.

const (
	// DefaultTokenLifetime is a new token's lifetime when its request names none.
	DefaultTokenLifetime = 30 * 24 * time.Hour
	// DefaultMaxTokenLifetime bounds what a request may ask (hangar server --max-token-lifetime).
	DefaultMaxTokenLifetime = 365 * 24 * time.Hour
	// tokenUseEvery is how often a token's last use is written at most.
	tokenUseEvery = time.Minute
	// maxTokenNameLen bounds a token's name.
	maxTokenNameLen = 64
)

var tokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

type tokenCtxKey struct{}

// requestToken is the token authUser found for the request (none for other credentials).
func requestToken(ctx context.Context) (store.APIToken, bool) {
	t, ok := ctx.Value(tokenCtxKey{}).(store.APIToken)
	return t, ok
}

// userByToken finds the user of an API token and checks that it may be used now: a token that is
// unknown, revoked or expired, or whose user is suspended, is a 401 saying which. A use is
// recorded (at most once a minute).
func (s *Server) userByToken(ctx context.Context, token string) (workspace.User, store.APIToken, error) {
	t, u, err := s.store.TokenByHash(ctx, HashToken(token))
	if errors.Is(err, store.ErrNotFound) {
		return workspace.User{}, store.APIToken{}, errUnauthorized("invalid token")
	} else if err != nil {
		return workspace.User{}, store.APIToken{}, err
	}
	now := s.clock.Now()
	if err := usable(t, u, now); err != nil {
		return workspace.User{}, store.APIToken{}, err
	}
	if err := s.store.TouchToken(ctx, t, now, tokenUseEvery); err != nil && ctx.Err() == nil {
		s.log.Warn("cannot record a token's use", "token_id", t.ID, "err", err)
	}
	return u, t, nil
}

// usable is the rule of a token's use: not revoked, not expired, its user not suspended.
func usable(t store.APIToken, u workspace.User, now time.Time) error {
	switch {
	case t.RevokedAt != nil:
		return errUnauthorized(fmt.Sprintf("token %q was revoked at %s: create a new one (hangar tokens create) or ask an admin",
			t.Name, t.RevokedAt.Format(time.RFC3339)))
	case t.Expired(now):
		return errUnauthorized(fmt.Sprintf("token %q expired at %s: create a new one (hangar tokens create) or ask an admin",
			t.Name, t.ExpiresAt.Format(time.RFC3339)))
	case u.SuspendedAt != nil:
		return errUnauthorized(fmt.Sprintf("user %s is suspended (since %s): ask an admin", u.Username, u.SuspendedAt.Format(time.RFC3339)))
	}
	return nil
}

func tokenStatus(t store.APIToken, now time.Time) string {
	switch {
	case t.RevokedAt != nil:
		return sdk.TokenRevoked
	case t.Expired(now):
		return sdk.TokenExpired
	}
	return sdk.TokenActive
}

func toToken(t store.APIToken, user string, now time.Time) sdk.Token {
	return sdk.Token{ID: t.ID, Name: t.Name, User: user, Status: tokenStatus(t, now), CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt,
		LastUsedAt: t.LastUsedAt, RevokedAt: t.RevokedAt}
}

// checkTokenName is the rule of a token's name.
func checkTokenName(v *workspace.ValidationError, name string) {
	if len(name) > maxTokenNameLen || !tokenName.MatchString(name) {
		v.Add("name", "must be 1 to %d letters, digits, '.', '_' or '-', starting with a letter or digit, got %q", maxTokenNameLen, name)
	}
}

// tokenLifetime checks a request's lifetime_seconds (0: the default) against the server's maximum.
func (s *Server) tokenLifetime(v *workspace.ValidationError, field string, secs int64) time.Duration {
	if secs == 0 {
		return min(s.tokenDefault, s.tokenMax)
	}
	if secs < 60 || secs > int64(s.tokenMax/time.Second) {
		v.Add(field, "must be from 60 to %d seconds (the server's --max-token-lifetime, %s), got %d", int64(s.tokenMax/time.Second), s.tokenMax, secs)
		return 0
	}
	return time.Duration(secs) * time.Second
}

// createToken serves POST /api/v1/tokens: a token for the caller. The secret is in this answer only.
func (s *Server) createToken(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	var req sdk.CreateTokenRequest
	if err := decodeJSON(w, r, sdk.MaxBodyBytes, &req); err != nil {
		return err
	}
	defer s.audit(&r, u, audit.TokenCreate, audit.Target{Kind: audit.KindToken, Name: u.Username + "/" + clip(req.Name)})(&err)
	v := &workspace.ValidationError{}
	checkTokenName(v, req.Name)
	life := s.tokenLifetime(v, "lifetime_seconds", req.LifetimeSeconds)
	if err := v.Err(); err != nil {
		return err
	}
	now := s.clock.Now()
	// Not past the expiry of the token that mints it (revocation_credentials.go).
	expires, cappedBy, err := s.capToMinter(r, u, now.Add(life), req.LifetimeSeconds)
	if err != nil {
		return err
	}
	secret := NewToken(userTokenPrefix)
	t := store.APIToken{ID: uuid.NewString(), UserID: u.ID, Name: req.Name, Hash: HashToken(secret), CreatedAt: now, ExpiresAt: &expires}
	entry := audit.From(r.Context())
	entry.SetTarget(audit.Target{Kind: audit.KindToken, ID: t.ID, Name: u.Username + "/" + t.Name})
	entry.Set("expires_at", expires.Format(time.RFC3339))
	if cappedBy != "" {
		entry.Set("capped_by", cappedBy)
	}
	if err := s.store.CreateToken(r.Context(), t); errors.Is(err, store.ErrConflict) {
		return errConflict(fmt.Sprintf("you have a token named %q already", req.Name), "revoke it first (hangar tokens revoke "+req.Name+") or choose another name")
	} else if err != nil {
		return err
	}
	s.log.Info("token created", "user", u.Username, "token", t.Name, "expires_at", expires)
	out := toToken(t, u.Username, now)
	out.Token = secret
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// tokenOwner is the user whose tokens a request names: ?user=NAME (admins only; others get 403
// for anyone but themselves), else the caller.
func (s *Server) tokenOwner(r *http.Request, caller workspace.User) (workspace.User, error) {
	name := r.URL.Query().Get("user")
	if name == "" || name == caller.Username {
		return caller, nil
	}
	if !caller.Admin {
		return workspace.User{}, errForbidden("only an admin may see or revoke another user's tokens")
	}
	u, err := s.store.UserByUsername(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		return workspace.User{}, errNotFound("no user %q", name)
	}
	return u, err
}

// listTokens serves GET /api/v1/tokens[?user=NAME]: the tokens, never their secrets.
func (s *Server) listTokens(w http.ResponseWriter, r *http.Request, caller workspace.User) error {
	u, err := s.tokenOwner(r, caller)
	if err != nil {
		return err
	}
	list, err := s.store.ListTokens(r.Context(), u.ID)
	if err != nil {
		return err
	}
	now := s.clock.Now()
	out := make([]sdk.Token, 0, len(list))
	for _, t := range list {
		out = append(out, toToken(t, u.Username, now))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// revokeToken serves DELETE /api/v1/tokens/{token}[?user=NAME]: by id, or by the name of a token
// that is not revoked. It and the sessions begun with it stop working at once.
func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request, caller workspace.User) (err error) {
	ref := r.PathValue("token")
	defer s.audit(&r, caller, audit.TokenRevoke, audit.Target{Kind: audit.KindToken, Name: clip(ref)})(&err)
	u, err := s.tokenOwner(r, caller)
	if err != nil {
		return err
	}
	entry := audit.From(r.Context())
	entry.SetTarget(audit.Target{Kind: audit.KindToken, Name: u.Username + "/" + clip(ref)})
	t, err := s.store.RevokeToken(r.Context(), u.ID, ref, s.clock.Now())
	if errors.Is(err, store.ErrNotFound) {
		return errNotFound("%s has no token %q (by id, or by name among those not revoked)", u.Username, ref)
	} else if err != nil {
		return err
	}
	s.log.Info("token revoked", "user", u.Username, "token", t.Name, "by", caller.Username)
	writeJSON(w, http.StatusOK, toToken(t, u.Username, s.clock.Now()))
	return nil
}
