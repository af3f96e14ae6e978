package server

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/backend"
	"github.com/hangar-dev/hangar/internal/backend/kube"
	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

func (s *Server) createWorkspace(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	var req sdk.CreateWorkspaceRequest
	if err := decodeJSON(w, r, sdk.MaxBodyBytes, &req); err != nil {
		return err
	}
	defer s.audit(&r, u, audit.WorkspaceCreate, audit.Target{Kind: audit.KindWorkspace, Name: u.Username + "/" + req.Name})(&err)
	v := &workspace.ValidationError{}
	logLevel, err := build.ParseLogLevel(req.LogLevel)
	if err != nil {
		v.Add("log_level", "%v", err)
	}
	// The name, and with the owner's username one URL label (docs/decisions.md, "Workspace names,
	// cluster names and URLs"), for both backends.
	if msg := workspace.CheckNameForOwner(req.Name, u.Username); msg != "" {
		v.Add("name", "%s", msg)
	}
	var tmpl *store.Template
	if req.Template != "" {
		t, err := s.store.TemplateByName(r.Context(), req.Template)
		if isNotFound(err) {
			return errBadRequest("invalid request", sdk.Validation{Field: "template", Detail: fmt.Sprintf("no template is named %q", req.Template)})
		}
		if err != nil {
			return err
		}
		if t.Kind == workspace.KindTerraform {
			if err := v.Err(); err != nil {
				return err
			}
			return s.createTerraformWorkspace(w, r, u, req, t, logLevel)
		}
		tmpl = &t
	}
	if len(req.Parameters) > 0 {
		v.Add("parameters", "are for terraform templates: a Kubernetes workspace has none")
	}
	if logLevel != "" {
		v.Add("log_level", "applies to Terraform workspaces only: an agent runs this one, with no Terraform")
	}
	if req.Preset != "" {
		v.Add("preset", "applies to a terraform template (presets are pools of prebuilt terraform workspaces)")
	}
	if err := v.Err(); err != nil {
		return err
	}
	var repo *kube.Repository
	var repoWarnings []string
	if req.Repository != nil {
		fallback := fallbackName("")
		if tmpl != nil {
			fallback = fallbackName(tmpl.Name)
		}
		if repo, repoWarnings, err = s.readRepository(r.Context(), u, *req.Repository, fallback); err != nil {
			return err
		}
	}
	ws, df, err := s.kube.Create(r.Context(), u, kube.CreateRequest{Name: req.Name, Agent: req.Agent, Devfile: req.Devfile, Devcontainer: req.Devcontainer, Template: tmpl, Repository: repo})
	if err != nil {
		return err
	}
	out := s.toWorkspace(ws)
	out.Warnings, out.Definition = append(repoWarnings, df.Warnings()...), df.Definition()
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// isNotFound reports whether err's code is NotFound (store.ErrNotFound, backend.ErrHidden,
// errNotFound).
func isNotFound(err error) bool { return errs.Is(err, errs.NotFound) }

// workspaceRef reads the {name} path value, `name` (the caller's own) or `owner/name`, into the
// store's reference. A malformed value is 400 naming the field; another owner is 404 unless the
// caller is an admin (a user does not learn which usernames or names exist).
func (s *Server) workspaceRef(r *http.Request, u workspace.User) (store.WorkspaceRef, error) {
	raw := r.PathValue("name")
	ref, err := workspace.ParseRef("name", raw)
	if err != nil {
		return store.WorkspaceRef{}, err
	}
	if ref.Owner == "" || ref.Owner == u.Username {
		return store.WorkspaceRef{OwnerID: u.ID, Name: ref.Name}, nil
	}
	if !u.Admin {
		return store.WorkspaceRef{}, errNotFound("workspace %q not found", raw)
	}
	if ref.Owner == store.PrebuildsUsername {
		// The prebuilt workspaces' system user, found by no username lookup: an admin names them so.
		return store.WorkspaceRef{OwnerID: store.PrebuildsUserID, Name: ref.Name}, nil
	}
	owner, err := s.store.UserByUsername(r.Context(), ref.Owner)
	if isNotFound(err) {
		return store.WorkspaceRef{}, errNotFound("workspace %q not found", raw)
	}
	if err != nil {
		return store.WorkspaceRef{}, err
	}
	return store.WorkspaceRef{OwnerID: owner.ID, Name: ref.Name}, nil
}

// readWorkspace reads the workspace the {name} path value names, if the caller may see it.
func (s *Server) readWorkspace(r *http.Request, u workspace.User) (workspace.Workspace, error) {
	ref, err := s.workspaceRef(r, u)
	if err != nil {
		return workspace.Workspace{}, err
	}
	row, err := s.store.Workspace(r.Context(), ref)
	if (err == nil && !workspace.Visible(u, row)) || isNotFound(err) {
		return row, errNotFound("workspace %q not found", r.PathValue("name"))
	}
	return row, err
}

func (s *Server) listWorkspaces(w http.ResponseWriter, r *http.Request, u workspace.User) error {
	f := store.ListFilter{OwnerID: u.ID}
	if u.Admin {
		f.OwnerID = ""
	}
	if v := r.URL.Query().Get("all"); v != "" {
		all, err := strconv.ParseBool(v)
		if err != nil {
			return errBadRequest("invalid request", sdk.Validation{Field: "all", Detail: fmt.Sprintf("must be true or false, got %q", v)})
		}
		f.Terminated = all
	}
	if v := r.URL.Query().Get("prebuilds"); v != "" {
		pb, err := strconv.ParseBool(v)
		if err != nil {
			return errBadRequest("invalid request", sdk.Validation{Field: "prebuilds", Detail: fmt.Sprintf("must be true or false, got %q", v)})
		}
		if pb && !u.Admin {
			return errForbidden("only an admin may list the prebuilt workspaces")
		}
		f.Prebuilds = pb
	}
	rows, err := s.store.ListWorkspaces(r.Context(), f)
	if err != nil {
		return err
	}
	out := make([]sdk.Workspace, 0, len(rows))
	pol, ok := s.policies(r.Context())
	for _, row := range rows {
		ws := s.toWorkspace(row)
		if ok {
			s.automation(pol.Of(row), row, &ws)
		}
		out = append(out, ws)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getWorkspace(w http.ResponseWriter, r *http.Request, u workspace.User) error {
	row, err := s.readWorkspace(r, u)
	if err != nil {
		return err
	}
	out := s.toWorkspace(row)
	s.withAutomation(r.Context(), row, &out)
	out.Dotfiles = s.dotfilesOf(r, row)
	out.StartupSteps, out.StartupFailed = s.startupStepsOf(r, row, out.Dotfiles)
	s.metadataOf(r.Context(), row, &out)
	if row.Backend == workspace.KindKubernetes {
		// The rest of the answer stands without them (an agent deleted since, say).
		if df, err := s.kube.Devfile(r.Context(), row); err == nil {
			out.Definition = df.Definition()
		}
		if eps, err := s.kube.Endpoints(r.Context(), row); err != nil {
			s.log.Warn("cannot list a workspace's endpoints", "workspace", row.OwnerName+"/"+row.Name, "err", err)
		} else {
			out.Endpoints = toEndpoints(eps)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) updateWorkspace(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	var req sdk.UpdateWorkspaceRequest
	if err := decodeJSON(w, r, sdk.MaxBodyBytes, &req); err != nil {
		return err
	}
	defer s.audit(&r, u, audit.WorkspaceTransition, workspaceTarget(r, u))(&err)
	to, err := workspace.ParseDesired(req.DesiredState)
	if err != nil {
		return errBadRequest("invalid request", sdk.Validation{Field: "desired_state", Detail: err.Error()})
	}
	logLevel, err := build.ParseLogLevel(req.LogLevel)
	if err != nil {
		return errBadRequest("invalid request", sdk.Validation{Field: "log_level", Detail: err.Error()})
	}
	ref, err := s.workspaceRef(r, u)
	if err != nil {
		return err
	}
	now := s.clock.Now()
	row, err := s.backends.SetDesired(r.Context(), u, ref, func(workspace.Workspace, bool) (backend.Change, error) {
		return backend.Change{To: to, LogLevel: logLevel, Use: &now}, nil
	})
	if err != nil {
		return s.buildErr(r, err)
	}
	if row.Backend != workspace.KindKubernetes {
		s.used(r, row, u) // the Kubernetes service records the use in the change's transaction
	}
	s.log.Info("desired state changed", "workspace", row.Name, "owner", row.OwnerName, "desired_state", row.DesiredState, "by", u.Username)
	out := s.toWorkspace(row)
	s.withAutomation(r.Context(), row, &out)
	if row.Backend == workspace.KindKubernetes {
		// The devfile's warnings again, for whoever starts the workspace now (it was parsed at creation).
		if df, err := s.kube.Devfile(r.Context(), row); err == nil {
			out.Warnings = df.Warnings()
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// used records a user's change of the workspace as its use (what dormancy and autostop count
// from), when the user is its owner: an admin's change is not the owner's use.
func (s *Server) used(r *http.Request, row workspace.Workspace, u workspace.User) {
	if row.OwnerID != u.ID {
		return
	}
	if err := s.store.RecordWorkspaceActivity(r.Context(), row.ID, s.clock.Now()); err != nil {
		s.log.Warn("record workspace use", "workspace", row.Name, "err", err)
	}
}
