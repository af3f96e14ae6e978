package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/backend"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Users for admins (docs/decisions.md, "Suspending and deleting users"): list, suspend or
// reinstate, delete.

// listUsers serves GET /api/v1/users (admins).
func (s *Server) listUsers(w http.ResponseWriter, r *http.Request, _ workspace.User) error {
	users, err := s.store.ListUsers(r.Context())
	if err != nil {
		return err
	}
	out := make([]sdk.User, 0, len(users))
	for _, u := range users {
		out = append(out, toUser(u, ""))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// targetUser reads the user {username} names for an admin's change; nobody changes themselves this
// way (the bootstrap admin cannot suspend or delete itself, nor can anyone else lock themselves out).
func (s *Server) targetUser(r *http.Request, caller workspace.User, what string) (workspace.User, error) {
	name := r.PathValue("username")
	if name == caller.Username || name == "me" {
		return workspace.User{}, errConflict("you cannot "+what+" yourself", "another admin may")
	}
	u, err := s.store.UserByUsername(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		return workspace.User{}, errNotFound("no user %q", name)
	}
	audit.From(r.Context()).SetTarget(audit.Target{Kind: audit.KindUser, ID: u.ID, Name: u.Username})
	return u, err
}

// removalErr words the store's refusals of a suspension or deletion.
func removalErr(err error) error {
	switch {
	case errors.Is(err, store.ErrLastAdmin):
		return errConflict("that would leave no active admin", err.Error()+"; make another user admin first")
	case errors.Is(err, store.ErrOwnsWorkspaces):
		return errConflict("the user owns workspaces", err.Error()+"; delete them first (hangar delete OWNER/NAME), nothing is deleted with the user")
	}
	return err
}

// updateUser serves PATCH /api/v1/users/{username} (admins): {"suspended": true} suspends the
// user and asks each of its running workspaces to stop; false reinstates it (its workspaces stay
// stopped until started).
func (s *Server) updateUser(w http.ResponseWriter, r *http.Request, caller workspace.User) (err error) {
	var req sdk.UpdateUserRequest
	if err := decodeJSON(w, r, sdk.MaxBodyBytes, &req); err != nil {
		return err
	}
	defer s.audit(&r, caller, audit.UserSuspend, audit.Target{Kind: audit.KindUser, Name: r.PathValue("username")})(&err)
	if req.Suspended == nil {
		return errBadRequest("invalid request", sdk.Validation{Field: "suspended", Detail: "is required: true suspends the user, false reinstates it"})
	}
	verb := "reinstate"
	if *req.Suspended {
		verb = "suspend"
	}
	u, err := s.targetUser(r, caller, verb)
	if err != nil {
		return err
	}
	audit.From(r.Context()).Set("suspended", *req.Suspended)
	var at *time.Time
	if *req.Suspended {
		now := s.clock.Now()
		at = &now
	}
	u, err = s.store.SetUserSuspended(r.Context(), u.ID, at)
	if err != nil {
		return removalErr(err)
	}
	s.log.Info("user "+verb+"d", "user", u.Username, "by", caller.Username)
	out := toUser(u, "")
	if *req.Suspended {
		out.StoppedWorkspaces = s.stopWorkspacesOf(r, caller, u)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// stopWorkspacesOf asks every workspace of u that is desired Running to stop, on behalf of the
// admin who suspended u (each change audited as a transition), and returns their names. A failure
// is logged and leaves that workspace as it was: the suspension stands either way, and the user
// cannot reach it.
func (s *Server) stopWorkspacesOf(r *http.Request, caller, u workspace.User) []string {
	ctx := r.Context()
	rows, err := s.store.ListWorkspaces(ctx, store.ListFilter{OwnerID: u.ID})
	if err != nil {
		s.log.Error("suspend: list the user's workspaces", "user", u.Username, "err", err)
		return nil
	}
	var stopped []string
	for _, ws := range rows {
		if ws.DesiredState != workspace.Running {
			continue
		}
		reason := fmt.Sprintf("suspended: %s was suspended by %s", u.Username, caller.Username)
		actx, p := s.auditor.Begin(ctx, actorOf(caller), audit.WorkspaceTransition, audit.Workspace(ws.ID, ws.OwnerName, ws.Name))
		_, err := s.backends.SetDesired(actx, caller, store.WorkspaceRef{ID: ws.ID}, func(cur workspace.Workspace, _ bool) (backend.Change, error) {
			c := backend.Change{To: workspace.Stopped, Reason: reason}
			backend.AuditChange(p, cur, c)
			return c, nil
		})
		s.auditor.End(actx, p, auditErr(err))
		if err != nil {
			s.log.Error("suspend: stop a workspace", "workspace", ws.OwnerName+"/"+ws.Name, "err", err)
			continue
		}
		stopped = append(stopped, ws.OwnerName+"/"+ws.Name)
	}
	return stopped
}

// deleteUser serves DELETE /api/v1/users/{username} (admins): refused while the user owns
// workspaces that are not deleted; else the user is marked deleted (its name stays taken), and its
// tokens, sessions and keys end.
func (s *Server) deleteUser(w http.ResponseWriter, r *http.Request, caller workspace.User) (err error) {
	defer s.audit(&r, caller, audit.UserDelete, audit.Target{Kind: audit.KindUser, Name: r.PathValue("username")})(&err)
	u, err := s.targetUser(r, caller, "delete")
	if err != nil {
		return err
	}
	if err := s.store.DeleteUser(r.Context(), u.ID, s.clock.Now()); err != nil {
		return removalErr(err)
	}
	s.log.Info("user deleted", "user", u.Username, "by", caller.Username)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
