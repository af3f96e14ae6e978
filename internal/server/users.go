package server

import (
	"net/http"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

func (s *Server) me(w http.ResponseWriter, r *http.Request, u store.User) error {
	writeJSON(w, http.StatusOK, toUser(u, ""))
	return nil
}

func (s *Server) createUser(w http.ResponseWriter, r *http.Request, _ store.User) error {
	var req sdk.CreateUserRequest
	if err := decodeJSON(w, r, sdk.MaxBodyBytes, &req); err != nil {
		return err
	}
	v := &workspace.ValidationError{}
	if msg := workspace.CheckUsername(req.Username); msg != "" {
		v.Add("username", "%s", msg)
	}
	if err := v.Err(); err != nil {
		return err
	}
	token := NewToken(userTokenPrefix)
	u := store.User{ID: uuid.NewString(), Username: req.Username, Admin: req.Admin, TokenHash: HashToken(token), CreatedAt: s.clock.Now()}
	if err := s.store.CreateUser(r.Context(), u); err != nil {
		return err
	}
	s.log.Info("user created", "user", u.Username, "admin", u.Admin)
	writeJSON(w, http.StatusCreated, toUser(u, token))
	return nil
}
