package server

import (
	"cmp"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/reconcile"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// MaxWorkspaceNameLength keeps `<port>-<name>` within one 63-character DNS label and
// `hangar-<name>` a valid namespace.
const MaxWorkspaceNameLength = 40

func (s *Server) createWorkspace(w http.ResponseWriter, r *http.Request, u store.User) error {
	var req sdk.CreateWorkspaceRequest
	if err := decodeJSON(w, r, sdk.MaxBodyBytes, &req); err != nil {
		return err
	}
	v := &workspace.ValidationError{}
	if !workspace.IsDNSLabel(req.Name, MaxWorkspaceNameLength) {
		v.Add("name", "must be 1 to %d lower-case letters, digits or '-', starting and ending with a letter or digit, got %q", MaxWorkspaceNameLength, req.Name)
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
	ns := "hangar-" + req.Name
	if cfg.NamespaceMode == workspace.NamespaceShared {
		ns = cfg.SharedNamespace
	}
	url := ""
	if port, path, ok := df.PublicEndpoint(); ok {
		url = fmt.Sprintf("https://%d-%s.%s%s", port, req.Name, cfg.DNSZone, cmp.Or(path, "/"))
	}
	now := s.clock.Now()
	id := uuid.NewString()
	// Generate once now, so that a devfile the agent's limits refuse (max resources) is refused at
	// creation with the reason, not after the agent fails to apply it.
	if _, err := devfile.Generate(df, devfile.Params{WorkspaceID: id, WorkspaceName: req.Name, Owner: u.Username, AgentID: agent.ID,
		Namespace: ns, DesiredState: workspace.Running, Agent: cfg}); err != nil {
		return err
	}
	ws := store.Workspace{
		ID: id, Name: req.Name, OwnerID: u.ID, OwnerName: u.Username, AgentID: agent.ID, AgentName: agent.Name,
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
	s.log.Info("workspace created", "workspace", ws.Name, "owner", u.Username, "agent", agent.Name)
	out := toWorkspace(ws)
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

func (s *Server) listWorkspaces(w http.ResponseWriter, r *http.Request, u store.User) error {
	owner := u.ID
	if u.Admin {
		owner = ""
	}
	rows, err := s.store.ListWorkspaces(r.Context(), owner)
	if err != nil {
		return err
	}
	out := make([]sdk.Workspace, 0, len(rows))
	for _, row := range rows {
		out = append(out, toWorkspace(row))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getWorkspace(w http.ResponseWriter, r *http.Request, u store.User) error {
	name := r.PathValue("name")
	row, err := s.store.WorkspaceByName(r.Context(), name)
	if (err == nil && !visible(u, row)) || isNotFound(err) {
		return errNotFound("workspace %q not found", name)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toWorkspace(row))
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
	hidden := errNotFound("workspace %q not found", name)
	if cur, err := s.store.WorkspaceByName(r.Context(), name); err == nil && cur.Backend == store.KindTerraform {
		if !visible(u, cur) {
			return hidden
		}
		row, err := s.builder.SetDesired(r.Context(), u, cur, to)
		if err != nil {
			return s.buildErr(r, err)
		}
		s.log.Info("desired state changed", "workspace", row.Name, "desired_state", row.DesiredState, "by", u.Username)
		writeJSON(w, http.StatusOK, toWorkspace(row))
		return nil
	}
	row, err := s.store.UpdateWorkspace(r.Context(), name, func(cur store.Workspace) (store.Workspace, error) {
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
	s.log.Info("desired state changed", "workspace", row.Name, "desired_state", row.DesiredState, "by", u.Username)
	out := toWorkspace(row)
	// The devfile's warnings again, for whoever starts the workspace now (it was parsed at creation).
	if df, err := s.devfile.get(row.ID, func() (string, error) { return s.store.WorkspaceDevfile(r.Context(), row.ID) }); err == nil {
		out.Warnings = df.Warnings()
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
