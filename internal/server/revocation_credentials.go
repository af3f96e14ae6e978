package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Credentials read again while a request lasts, and the tokens a credential may mint
// (docs/decisions.md, "API tokens" and "Sessions end with their token"):
//   - a long request (the live stream, an SSH connection, an agent's wait) asks again whether the
//     credential that opened it may still be used, at once when the revocation counter moves
//     (Store.SubscribeRevocations), whichever credential that was: a bearer token or a server
//     session's cookie;
//   - a token minted by a request authenticated with a token, or with a session begun from one,
//     does not outlive that token.

type sessionCtxKey struct{}

// withSession records the server session that authenticated a request (authBrowser).
func withSession(ctx context.Context, sess store.Session) context.Context {
	return context.WithValue(ctx, sessionCtxKey{}, sess)
}

// requestSession is the server session authBrowser found for the request (none for a bearer token).
func requestSession(ctx context.Context) (store.Session, bool) {
	sess, ok := ctx.Value(sessionCtxKey{}).(store.Session)
	return sess, ok
}

// credentialUser reads the user of the credential r was authenticated with again, now: its bearer
// token, else its server session cookie. A credential that may no longer be used (revoked,
// expired, signed out, its user suspended or deleted) is a 401 saying which; another error means
// the store could not say.
func (s *Server) credentialUser(ctx context.Context, r *http.Request) (workspace.User, error) {
	if token, ok := bearer(r); ok {
		u, _, err := s.userByToken(ctx, token)
		return u, err
	}
	c, err := r.Cookie(sessionCookie(r))
	if err != nil || c.Value == "" {
		return workspace.User{}, errUnauthorized("no credential: neither a bearer token nor a session cookie")
	}
	_, u, err := s.store.Session(ctx, HashToken(c.Value), store.SessionServer, s.clock.Now())
	if errors.Is(err, store.ErrNotFound) {
		why := strings.TrimSuffix(err.Error(), ": "+store.ErrNotFound.Error())
		return workspace.User{}, errUnauthorized("your session has ended (" + why + "): sign in again at /signin")
	}
	return u, err
}

// agentByToken is the agent whose token this is; a 401 when none.
func (s *Server) agentByToken(ctx context.Context, token string) (workspace.Agent, error) {
	a, err := s.store.AgentByTokenHash(ctx, HashToken(token))
	if errors.Is(err, store.ErrNotFound) {
		return workspace.Agent{}, errUnauthorized("invalid agent token")
	}
	return a, err
}

// agentStillAuthorized reads the agent request's token again: the 401 a new request with it would
// get once it was revoked or rotated, nil while it is still agent's (or when the store cannot
// say: the request goes on until the next look).
func (s *Server) agentStillAuthorized(ctx context.Context, r *http.Request, agent workspace.Agent) error {
	token, _ := bearer(r)
	a, err := s.agentByToken(ctx, token)
	switch {
	case errs.Is(err, errs.Unauthorized):
		return err
	case err != nil:
		return nil
	case a.ID != agent.ID:
		return errUnauthorized("invalid agent token")
	}
	return nil
}

// mintingToken is the API token behind the request's credential: its bearer token, or the token
// its server session began with. None for a session begun without one (an OIDC sign-in).
func (s *Server) mintingToken(r *http.Request, u workspace.User) (store.APIToken, bool, error) {
	if t, ok := requestToken(r.Context()); ok {
		return t, true, nil
	}
	sess, ok := requestSession(r.Context())
	if !ok || sess.TokenID == "" {
		return store.APIToken{}, false, nil
	}
	list, err := s.store.ListTokens(r.Context(), u.ID)
	if err != nil {
		return store.APIToken{}, false, err
	}
	for _, t := range list {
		if t.ID == sess.TokenID {
			return t, true, nil
		}
	}
	// The session's token is gone: the session would not have been found (Store.Session).
	return store.APIToken{}, false, errUnauthorized("your session has ended: sign in again at /signin")
}

// capToMinter bounds the expiry of a token that u mints for itself with the request's credential:
// not past the minting token's expiry. asked is the request's lifetime_seconds (0: none named): a
// lifetime named beyond it is refused, naming the field, rather than silently shortened; the
// default lifetime is shortened. It returns the expiry and the minting token's name when it bound it.
func (s *Server) capToMinter(r *http.Request, u workspace.User, expires time.Time, asked int64) (time.Time, string, error) {
	t, ok, err := s.mintingToken(r, u)
	if err != nil || !ok || t.ExpiresAt == nil || !expires.After(*t.ExpiresAt) {
		return expires, "", err
	}
	if asked != 0 {
		left := int64(t.ExpiresAt.Sub(s.clock.Now()) / time.Second)
		return time.Time{}, "", errBadRequest("invalid request", sdk.Validation{Field: "lifetime_seconds",
			Detail: fmt.Sprintf("must not outlive the token %q this request is authenticated with, which expires at %s: at most %d seconds, got %d "+
				"(a longer-lived token is made with a credential that lives longer, or after signing in through the sign-in provider)",
				t.Name, t.ExpiresAt.Format(time.RFC3339), left, asked)})
	}
	return *t.ExpiresAt, t.Name, nil
}
