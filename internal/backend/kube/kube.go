// Package kube is the Kubernetes backend's service: the use cases of workspaces that an agent runs
// (create, change the desired state) and the parsed devfiles they are generated from. The server's
// handlers and the lifecycle executor call it; the agent's reconcile reads what it writes.
package kube

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/backend"
	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/devcontainer"
	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/reconcile"
	"github.com/hangar-dev/hangar/internal/repodef"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Service is the Kubernetes backend.
type Service struct {
	st       store.Store
	clock    clock.Clock
	log      *slog.Logger
	devfiles *devfileCache
	traces   changeTraces // traces.go
	// helperKey and helperURL, when set (SetHelperTokens), give each workspace's helper a token
	// and the server's URL (workspace.KubeHelperToken).
	helperKey []byte
	helperURL func() string
	helperGit bool
}

var _ backend.Service = (*Service)(nil)

// New returns the service over st.
func New(st store.Store, c clock.Clock, log *slog.Logger) *Service {
	return &Service{st: st, clock: c, log: log, devfiles: newDevfileCache(50000)}
}

// SetHelperTokens makes every workspace's generated config give its helper a token made under key
// (workspace.KubeHelperToken) and url(), the server's URL as pods reach it, so that the helper
// reports to the server; with git (the server has forges), the helper and the project clone also
// ask it for the owner's git credentials. Call it before the service serves.
func (s *Service) SetHelperTokens(key []byte, url func() string, git bool) {
	s.helperKey, s.helperURL, s.helperGit = key, url, git
}

// Devfile returns the parsed devfile of the workspace ws (of its definition generation).
func (s *Service) Devfile(ctx context.Context, ws workspace.Workspace) (*devfile.Devfile, error) {
	return s.devfiles.get(ws.ID, ws.DefinitionGeneration, func() (string, error) { return s.st.WorkspaceDevfile(ctx, ws.ID) })
}

// Endpoint is a declared endpoint of a workspace, with the URL the access proxy serves it at
// when it is public.
type Endpoint struct {
	devfile.Endpoint
	URL string
}

// Endpoints lists the endpoints ws's devfile declares, each public one with its URL.
func (s *Service) Endpoints(ctx context.Context, ws workspace.Workspace) ([]Endpoint, error) {
	df, err := s.Devfile(ctx, ws)
	if err != nil {
		return nil, fmt.Errorf("read the devfile of workspace %s: %w", ws.Name, err)
	}
	agent, err := s.st.AgentByName(ctx, ws.AgentName)
	if err != nil {
		return nil, fmt.Errorf("read agent %s: %w", ws.AgentName, err)
	}
	var out []Endpoint
	for _, ep := range df.Endpoints() {
		e := Endpoint{Endpoint: ep}
		if ep.Public() {
			e.URL = agent.Config.EndpointURL(ep.Port, ws.Name, ws.OwnerName, ep.Path)
		}
		out = append(out, e)
	}
	return out, nil
}

// CreateRequest is a user's request for a workspace an agent runs.
type CreateRequest struct {
	Name  string
	Agent string
	// Devfile is the devfile's text; with a template, it must be empty (the template's active
	// version is the devfile); with neither, the workspace gets the default devfile.
	Devfile string
	// Devcontainer is a devcontainer.json's text, translated into the workspace's devfile
	// (internal/devcontainer); exclusive with Devfile and Template.
	Devcontainer string
	Template     *store.Template
	// Repository, when set, is the repository the workspace is created from: its first project,
	// defined by the definition found in it (exclusive with Devfile, Devcontainer and Template).
	Repository *Repository
	// Schedule is the workspace's own lifecycle settings (checked by the caller).
	Schedule workspace.Schedule
}

// Repository is a repository a workspace is created from, with the definition the caller read
// from it (internal/repodef; none: the agent's default devfile).
type Repository struct {
	URL, Ref, DevcontainerPath string
	Definition                 repodef.Definition
	// Files reads the repository's other files at the same ref (repodef.FS): the Dockerfile and
	// build context a devcontainer.json names. Nil: none can be read.
	Files fs.FS
}

// source is what the workspace keeps of r, read at now.
func (r Repository) source(now time.Time) *workspace.RepositorySource {
	return &workspace.RepositorySource{URL: r.URL, Ref: r.Ref, DevcontainerPath: r.DevcontainerPath, Commit: r.Definition.Commit,
		DefinitionPath: r.Definition.Path, ReadAt: now}
}

// repositoryDevfile is the devfile of a workspace created from a repository: the definition found
// in it (a devfile, or a devcontainer.json translated with the repository as the workspace
// folder), else fallback (a template's devfile; nil: the agent's default), with the repository as
// the first project at its ref. Errors in the repository's file name it.
func repositoryDevfile(r Repository, fallback []byte, name, id string, cfg workspace.AgentConfig) ([]byte, error) {
	var text []byte
	switch r.Definition.Kind {
	case repodef.Devfile:
		// Parsed first: its errors are the repository's, and the bounds of the parse protect
		// what follows.
		if _, err := devfile.Parse(r.Definition.Content); err != nil {
			return nil, fmt.Errorf("the repository's %s: %w", r.Definition.Path, err)
		}
		text = r.Definition.Content
	case repodef.Devcontainer:
		t, err := devcontainer.Translate(r.Definition.Content, devcontainer.Options{Basename: devfile.ProjectName(r.URL), ID: id, Caps: cfg.MaxResources, FromRepository: true,
			Repo: r.Files, Dir: path.Dir(r.Definition.Path)})
		if err != nil {
			return nil, fmt.Errorf("the repository's %s: %w", r.Definition.Path, err)
		}
		text = t.Devfile
	default:
		text = fallback
		if text == nil {
			text = devfile.Default()
			if cfg.DefaultDevfile != "" {
				text = []byte(cfg.DefaultDevfile)
			}
		}
	}
	return devfile.WithFirstProject(text, r.URL, r.Ref)
}

// templateDevfile reads the devfile of t's active version. With a repository, it must say that the
// repository defines the workspace (devfile.DefinitionFromAttribute; it is then the fallback),
// else the template defines it and a repository is refused, naming the field.
func (s *Service) templateDevfile(ctx context.Context, t store.Template, withRepository bool) ([]byte, error) {
	ver, err := s.st.TemplateVersionByID(ctx, t.ActiveVersionID)
	if err != nil {
		return nil, fmt.Errorf("read template %q: %w", t.Name, err)
	}
	if withRepository {
		df, err := devfile.Parse(ver.Archive)
		if err != nil {
			return nil, fmt.Errorf("template %q: %w", t.Name, err)
		}
		if !df.DefinitionFromRepository() {
			v := &workspace.ValidationError{}
			v.Add("repository", "the template %q defines the workspace: its devfile does not take the definition from the repository (attributes: {%s: %s}), so give the repository or the template", t.Name, devfile.DefinitionFromAttribute, devfile.DefinitionFromRepository)
			return nil, v.Err()
		}
	}
	return ver.Archive, nil
}

// Create creates the workspace, desired Running, after checking that the agent exists and that its
// limits accept the devfile (generated once now, so that a devfile the agent's limits refuse is
// refused with the reason at creation, not after the agent fails to apply it).
func (s *Service) Create(ctx context.Context, u workspace.User, req CreateRequest) (workspace.Workspace, *devfile.Devfile, error) {
	v := &workspace.ValidationError{}
	if req.Template != nil && req.Devfile != "" {
		v.Add("devfile", "comes from the template %q: give one or the other", req.Template.Name)
	}
	if req.Agent == "" {
		v.Add("agent", "is required: the name of the agent whose cluster runs the workspace")
	}
	if len(req.Devfile) > sdk.MaxDevfileBytes {
		v.Add("devfile", "is %d bytes, the limit is %d", len(req.Devfile), sdk.MaxDevfileBytes)
	}
	if req.Devcontainer != "" && req.Devfile != "" {
		v.Add("devcontainer", "and devfile both define the workspace: give one or the other")
	}
	if req.Devcontainer != "" && req.Template != nil {
		v.Add("devcontainer", "and the template %q both define the workspace: give one or the other", req.Template.Name)
	}
	if len(req.Devcontainer) > sdk.MaxDevfileBytes {
		v.Add("devcontainer", "is %d bytes, the limit is %d", len(req.Devcontainer), sdk.MaxDevfileBytes)
	}
	if req.Repository != nil && (req.Devfile != "" || req.Devcontainer != "") {
		v.Add("repository", "defines the workspace (its devfile or devcontainer.json): give no devfile or devcontainer with it")
	}
	if err := v.Err(); err != nil {
		return workspace.Workspace{}, nil, err
	}
	agent, err := s.st.AgentByName(ctx, req.Agent)
	if err != nil {
		if isNotFound(err) {
			v.Add("agent", "no agent is named %q", req.Agent)
			return workspace.Workspace{}, nil, v.Err()
		}
		return workspace.Workspace{}, nil, err
	}
	var tmplText []byte
	if req.Template != nil {
		if tmplText, err = s.templateDevfile(ctx, *req.Template, req.Repository != nil); err != nil {
			return workspace.Workspace{}, nil, err
		}
	}
	id := uuid.NewString()
	text := []byte(req.Devfile)
	if req.Repository != nil {
		if text, err = repositoryDevfile(*req.Repository, tmplText, req.Name, id, agent.Config); err != nil {
			return workspace.Workspace{}, nil, err
		}
	} else if req.Devcontainer != "" {
		// Its devfile is what is kept: the workspace is generated from it as from any devfile.
		r, err := devcontainer.Translate([]byte(req.Devcontainer), devcontainer.Options{Basename: req.Name, ID: id, Caps: agent.Config.MaxResources})
		if err != nil {
			return workspace.Workspace{}, nil, err
		}
		text = r.Devfile
	} else if req.Template != nil {
		text = tmplText
	} else if req.Devfile == "" && agent.Config.DefaultDevfile != "" {
		text = []byte(agent.Config.DefaultDevfile)
	} else if req.Devfile == "" {
		text = devfile.Default()
	}
	df, err := devfile.Parse(text)
	if err != nil {
		return workspace.Workspace{}, nil, err
	}
	cfg := agent.Config
	now := s.clock.Now()
	// The cluster name is unique to this workspace: two owners' "dev", or a "dev" created again while
	// the previous one is being deleted, never share a namespace or an object.
	kubeName := workspace.KubeName(req.Name, id)
	ns := workspace.Namespace(kubeName)
	if cfg.NamespaceMode == workspace.NamespaceShared {
		ns = cfg.SharedNamespace
	}
	url := ""
	if port, path, ok := df.PublicEndpoint(); ok {
		url = cfg.EndpointURL(port, req.Name, u.Username, path)
	}
	if _, err := devfile.Generate(df, devfile.Params{WorkspaceID: id, WorkspaceName: req.Name, KubeName: kubeName, Owner: u.Username, AgentID: agent.ID,
		Namespace: ns, DesiredState: workspace.Running, Agent: cfg}); err != nil {
		return workspace.Workspace{}, nil, err
	}
	ws := workspace.Workspace{
		ID: id, Name: req.Name, KubeName: kubeName, OwnerID: u.ID, OwnerName: u.Username, AgentID: agent.ID, AgentName: agent.Name,
		Namespace: ns, Devfile: string(text),
		DesiredState: workspace.Running, ActualState: workspace.CreationRequested, DesiredStateUpdatedAt: now,
		URL: url, CreatedAt: now, Backend: workspace.KindKubernetes, Schedule: req.Schedule, DefinitionGeneration: 1,
	}
	if req.Repository != nil {
		ws.Repository = req.Repository.source(now)
	}
	if req.Template != nil {
		ws.TemplateID, ws.TemplateName = req.Template.ID, req.Template.Name
	}
	entry := audit.From(ctx)
	entry.SetTarget(audit.Workspace(ws.ID, u.Username, ws.Name))
	entry.Set("backend", workspace.KindKubernetes)
	entry.Set("agent", agent.Name)
	if req.Template != nil {
		entry.Set("template", req.Template.Name)
		entry.Set("template_version_id", req.Template.ActiveVersionID)
	}
	if err := s.st.CreateWorkspace(ctx, ws, *cfg.WorkspacesQuota, *cfg.WorkspacesPerUserQuota); err != nil {
		return workspace.Workspace{}, nil, err
	}
	s.devfiles.put(ws.ID, ws.DefinitionGeneration, df)
	s.traces.record(ctx, ws.KubeName)
	s.log.Info("workspace created", "workspace", ws.Name, "owner", u.Username, "agent", agent.Name, "kube_name", kubeName)
	return ws, df, nil
}

// SetDesired changes the desired state in one transaction on the locked row; the agent applies it
// at its next reconcile (backend.Service).
func (s *Service) SetDesired(ctx context.Context, by workspace.User, ref store.WorkspaceRef, decide backend.Decide) (workspace.Workspace, error) {
	var other workspace.Workspace // the row, when another backend runs it
	changed := false
	row, err := s.st.UpdateWorkspace(ctx, ref, func(cur workspace.Workspace) (workspace.Workspace, error) {
		changed = false // the store may call this again (a retried transaction)
		if !workspace.Visible(by, cur) {
			return cur, backend.ErrHidden
		}
		if cur.Backend != workspace.KindKubernetes {
			other = cur
			return cur, fmt.Errorf("workspace %q is a %s workspace: %w", cur.Name, cur.Backend, backend.ErrOtherBackend)
		}
		entry := audit.From(ctx)
		entry.SetTarget(audit.Workspace(cur.ID, cur.OwnerName, cur.Name))
		c, err := decide(cur, false)
		if err != nil {
			return cur, err
		}
		if c.Use != nil && by.ID == cur.OwnerID && (cur.LastActivityAt == nil || cur.LastActivityAt.Before(*c.Use)) {
			use := *c.Use
			cur.LastActivityAt = &use
		}
		if c.To == "" {
			return cur, nil
		}
		backend.AuditChange(entry, cur, c)
		if c.LogLevel != "" {
			v := &workspace.ValidationError{}
			v.Add("log_level", "applies to Terraform workspaces only: an agent runs %q, with no Terraform", cur.Name)
			return cur, v.Err()
		}
		if err := workspace.CheckDesiredChange(cur.DesiredState, cur.ActualState, c.To); err != nil {
			return cur, fmt.Errorf("workspace %q from desired %s to %s: %w", cur.Name, cur.DesiredState, c.To, err)
		}
		if cur.DesiredState == c.To {
			return cur, nil // nothing to change; timestamps stay, no config is re-sent
		}
		now := s.clock.Now()
		cur.DesiredState = c.To
		// The time is taken inside the transaction, after the row lock (reconcile.UserChangeTime).
		cur.DesiredStateUpdatedAt = reconcile.UserChangeTime(cur, now)
		cur.DesiredStateReason = c.Reason
		changed = true
		switch {
		case c.Dormant && cur.DormantAt == nil:
			cur.DormantAt = &now
		case c.To == workspace.Running && c.Reason == "":
			cur.DormantAt = nil // its owner's start wakes a dormant workspace
		}
		return cur, nil
	})
	if errors.Is(err, backend.ErrOtherBackend) {
		return other, err
	}
	if err == nil && changed {
		s.traces.record(ctx, row.KubeName)
	}
	return row, err // the caller logs the change: the handler a user's, the executor its own
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
