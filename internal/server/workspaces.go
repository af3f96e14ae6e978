package server

import (
	"cmp"
	"fmt"
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/reconcile"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

func (s *Server) createWorkspace(w http.ResponseWriter, r *http.Request, u store.User) error {
	var req sdk.CreateWorkspaceRequest
	if err := decodeJSON(w, r, sdk.MaxBodyBytes, &req); err != nil {
		return err
	}
	v := &workspace.ValidationError{}
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
		if t.Kind == store.KindTerraform {
			if err := v.Err(); err != nil {
				return err
			}
			return s.createTerraformWorkspace(w, r, u, req, t)
		}
		tmpl = &t
		if req.Devfile != "" {
			v.Add("devfile", "comes from the template %q: give one or the other", t.Name)
		}
	}
	if req.Agent == "" {
		v.Add("agent", "is required: the name of the agent whose cluster runs the workspace")
	}
	if len(req.Devfile) > sdk.MaxDevfileBytes {
		v.Add("devfile", "is %d bytes, the limit is %d", len(req.Devfile), sdk.MaxDevfileBytes)
	}
	if err := v.Err(); err != nil {
		return err
	}
	agent, err := s.store.AgentByName(r.Context(), req.Agent)
	if err != nil {
		if isNotFound(err) {
			return errBadRequest("invalid request", sdk.Validation{Field: "agent", Detail: fmt.Sprintf("no agent is named %q", req.Agent)})
		}
		return err
	}
	text := []byte(req.Devfile)
	if tmpl != nil {
		ver, err := s.store.TemplateVersionByID(r.Context(), tmpl.ActiveVersionID)
		if err != nil {
			return fmt.Errorf("read template %q: %w", tmpl.Name, err)
		}
		text = ver.Archive
	} else if req.Devfile == "" {
		text = devfile.Default()
	}
	df, err := devfile.Parse(text)
	if err != nil {
		return err
	}
	cfg := agent.Config
	now := s.clock.Now()
	id := uuid.NewString()
	// The cluster name is unique to this workspace: two owners' "dev", or a "dev" created again while
	// the previous one is being deleted, never share a namespace or an object.
	kubeName := workspace.KubeName(req.Name, id)
	ns := workspace.Namespace(kubeName)
	if cfg.NamespaceMode == workspace.NamespaceShared {
		ns = cfg.SharedNamespace
	}
	url := ""
	if port, path, ok := df.PublicEndpoint(); ok {
		url = fmt.Sprintf("%s://%s.%s%s", cmp.Or(cfg.ProxyURLScheme, "https"), workspace.HostLabel(port, req.Name, u.Username), cfg.DNSZone, cmp.Or(path, "/"))
	}
	// Generate once now, so that a devfile the agent's limits refuse (max resources) is refused at
	// creation with the reason, not after the agent fails to apply it.
	if _, err := devfile.Generate(df, devfile.Params{WorkspaceID: id, WorkspaceName: req.Name, KubeName: kubeName, Owner: u.Username, AgentID: agent.ID,
		Namespace: ns, DesiredState: workspace.Running, Agent: cfg}); err != nil {
		return err
	}
	ws := store.Workspace{
		ID: id, Name: req.Name, KubeName: kubeName, OwnerID: u.ID, OwnerName: u.Username, AgentID: agent.ID, AgentName: agent.Name,
		Namespace: ns, Devfile: string(text),
		DesiredState: workspace.Running, ActualState: workspace.CreationRequested, DesiredStateUpdatedAt: now,
		URL: url, CreatedAt: now, Backend: store.KindKubernetes,
	}
	if tmpl != nil {
		ws.TemplateID, ws.TemplateName = tmpl.ID, tmpl.Name
	}
	if err := s.store.CreateWorkspace(r.Context(), ws, *cfg.WorkspacesQuota, *cfg.WorkspacesPerUserQuota); err != nil {
		return err
	}
	s.devfile.put(ws.ID, df)
	s.log.Info("workspace created", "workspace", ws.Name, "owner", u.Username, "agent", agent.Name, "kube_name", kubeName)
	out := s.toWorkspace(ws)
	out.Warnings = df.Warnings()
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func isNotFound(err error) bool {
	_, body := statusOf(err)
	return body.Message == "not found"
}

// visible reports whether u may see w: its owner, or an admin. Everything else is a 404, so that
// workspace names of other users are not disclosed.
func visible(u store.User, w store.Workspace) bool { return u.Admin || w.OwnerID == u.ID }

// workspaceRef reads the {name} path value, `name` (the caller's own) or `owner/name`, into the
// store's reference. A malformed value is 400 naming the field; another owner is 404 unless the
// caller is an admin (a user does not learn which usernames or names exist).
func (s *Server) workspaceRef(r *http.Request, u store.User) (store.WorkspaceRef, error) {
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
func (s *Server) readWorkspace(r *http.Request, u store.User) (store.Workspace, error) {
	ref, err := s.workspaceRef(r, u)
	if err != nil {
		return store.Workspace{}, err
	}
	row, err := s.store.Workspace(r.Context(), ref)
	if (err == nil && !visible(u, row)) || isNotFound(err) {
		return row, errNotFound("workspace %q not found", r.PathValue("name"))
	}
	return row, err
}

func (s *Server) listWorkspaces(w http.ResponseWriter, r *http.Request, u store.User) error {
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
	rows, err := s.store.ListWorkspaces(r.Context(), f)
	if err != nil {
		return err
	}
	out := make([]sdk.Workspace, 0, len(rows))
	for _, row := range rows {
		out = append(out, s.toWorkspace(row))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getWorkspace(w http.ResponseWriter, r *http.Request, u store.User) error {
	row, err := s.readWorkspace(r, u)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.toWorkspace(row))
	return nil
}

func (s *Server) updateWorkspace(w http.ResponseWriter, r *http.Request, u store.User) error {
	name := r.PathValue("name")
	var req sdk.UpdateWorkspaceRequest
	if err := decodeJSON(w, r, sdk.MaxBodyBytes, &req); err != nil {
		return err
	}
	to, err := workspace.ParseDesired(req.DesiredState)
	if err != nil {
		return errBadRequest("invalid request", sdk.Validation{Field: "desired_state", Detail: err.Error()})
	}
	ref, err := s.workspaceRef(r, u)
	if err != nil {
		return err
	}
	hidden := errNotFound("workspace %q not found", name)
	if cur, err := s.store.Workspace(r.Context(), ref); err == nil && cur.Backend == store.KindTerraform {
		if !visible(u, cur) {
			return hidden
		}
		row, err := s.builder.SetDesired(r.Context(), u, cur, to)
		if err != nil {
			return s.buildErr(r, err)
		}
		s.log.Info("desired state changed", "workspace", row.Name, "owner", row.OwnerName, "desired_state", row.DesiredState, "by", u.Username)
		writeJSON(w, http.StatusOK, s.toWorkspace(row))
		return nil
	}
	row, err := s.store.UpdateWorkspace(r.Context(), ref, func(cur store.Workspace) (store.Workspace, error) {
		if !visible(u, cur) {
			return cur, hidden
		}
		if err := workspace.CheckDesiredChange(cur.DesiredState, cur.ActualState, to); err != nil {
			return cur, fmt.Errorf("workspace %q from desired %s to %s: %w", cur.Name, cur.DesiredState, to, err)
		}
		if cur.DesiredState == to {
			return cur, nil // nothing to change; timestamps stay, no config is re-sent
		}
		cur.DesiredState = to
		// The time is taken inside the transaction, after the row lock (reconcile.UserChangeTime).
		cur.DesiredStateUpdatedAt = reconcile.UserChangeTime(cur, s.clock.Now())
		return cur, nil
	})
	if isNotFound(err) {
		return hidden
	}
	if err != nil {
		return err
	}
	s.log.Info("desired state changed", "workspace", row.Name, "owner", row.OwnerName, "desired_state", row.DesiredState, "by", u.Username)
	out := s.toWorkspace(row)
	// The devfile's warnings again, for whoever starts the workspace now (it was parsed at creation).
	if df, err := s.devfile.get(row.ID, func() (string, error) { return s.store.WorkspaceDevfile(r.Context(), row.ID) }); err == nil {
		out.Warnings = df.Warnings()
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
