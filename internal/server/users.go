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

func (s *Server) me(w http.ResponseWriter, r *http.Request, u workspace.User) error {
	writeJSON(w, http.StatusOK, toUser(u, ""))
	return nil
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
	token := NewToken(userTokenPrefix)
	u := workspace.User{ID: uuid.NewString(), Username: req.Username, Admin: req.Admin, TokenHash: HashToken(token), CreatedAt: s.clock.Now()}
	audit.From(r.Context()).SetTarget(audit.Target{Kind: audit.KindUser, ID: u.ID, Name: u.Username})
	if err := s.store.CreateUser(r.Context(), u); err != nil {
		return err
	}
	s.log.Info("user created", "user", u.Username, "admin", u.Admin)
	writeJSON(w, http.StatusCreated, toUser(u, token))
	return nil
}

// rotateToken serves POST /api/v1/users/{username}/token: a new token for the user (an admin for
// anyone, a user for itself). The old token stops working at once, and with it every browser and
// workspace session begun with it; proxies notice within their decision cache's lifetime.
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
	token := NewToken(userTokenPrefix)
	if err := s.store.SetUserToken(r.Context(), u.ID, HashToken(token)); err != nil {
		return err
	}
	s.log.Info("user token replaced", "user", u.Username, "by", caller.Username)
	writeJSON(w, http.StatusOK, toUser(u, token))
	return nil
}
