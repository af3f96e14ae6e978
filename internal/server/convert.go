package server

import (
	"encoding/json"
	"fmt"

	"github.com/hangar-dev/hangar/internal/backend/kube"
	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// This file is the only place store rows become API types.

func toUser(u workspace.User, token string) sdk.User {
	return sdk.User{ID: u.ID, Username: u.Username, Admin: u.Admin, Token: token, CreatedAt: u.CreatedAt, Suspended: u.SuspendedAt != nil, SuspendedAt: u.SuspendedAt,
		FullName: u.FullName, Email: u.Email, DotfilesRepo: u.DotfilesRepo}
}

func toAgent(a workspace.Agent, token string) (sdk.Agent, error) {
	cfg, err := json.Marshal(a.Config)
	if err != nil {
		return sdk.Agent{}, fmt.Errorf("encode agent config: %w", err)
	}
	return sdk.Agent{ID: a.ID, Name: a.Name, Token: token, Config: cfg, CreatedAt: a.CreatedAt}, nil
}

func (s *Server) toWorkspace(w workspace.Workspace) sdk.Workspace {
	desiredAt := w.DesiredStateUpdatedAt
	out := sdk.Workspace{
		ID:                        w.ID,
		Name:                      w.Name,
		Owner:                     w.OwnerName,
		KubeName:                  kubeNameOf(w),
		Agent:                     w.AgentName,
		Backend:                   w.Backend,
		Template:                  w.TemplateName,
		Preset:                    w.PresetName,
		Namespace:                 w.Namespace,
		DesiredState:              string(w.DesiredState),
		ActualState:               string(w.ActualState),
		DesiredStateUpdatedAt:     &desiredAt,
		ActualStateUpdatedAt:      w.ActualStateUpdatedAt,
		RespondedToAgentAt:        w.RespondedToAgentAt,
		DeploymentResourceVersion: w.DeploymentResourceVersion,
		URL:                       w.URL,
		CreatedAt:                 w.CreatedAt,
		ClaimedAt:                 w.ClaimedAt,
		LastActivityAt:            w.LastActivityAt,
		LastWorkAt:                w.LastWorkAt,
		LastWorkReason:            w.LastWorkReason,
		Schedule:                  toSDKSchedule(w.Schedule),
		DesiredStateReason:        w.DesiredStateReason,
		DormantAt:                 w.DormantAt,
	}
	if w.Backend == workspace.KindTerraform {
		out.AppsURL = s.appsURLTemplate(w)
		out.TemplateVersion = w.TemplateVersion
		out.Outdated = w.TemplateVersionID != "" && w.TemplateActiveVersionID != "" && w.TemplateVersionID != w.TemplateActiveVersionID
		for _, p := range w.Parameters {
			wp := sdk.WorkspaceParameter{Name: p.Name, Value: p.Value, Sensitive: p.Sensitive}
			if p.Sensitive {
				wp.Value = "" // never echoed
			}
			out.Parameters = append(out.Parameters, wp)
		}
	}
	if w.ErrorType != "" || w.ErrorMessage != "" {
		out.Error = &sdk.WorkspaceError{Type: w.ErrorType, Message: w.ErrorMessage}
	}
	if r := w.Repository; r != nil {
		out.Repository = &sdk.WorkspaceRepository{URL: r.URL, Ref: r.Ref, DevcontainerPath: r.DevcontainerPath, Commit: r.Commit,
			DefinitionPath: r.DefinitionPath, ReadAt: r.ReadAt}
	}
	h := workspace.Helper(w, s.clock.Now())
	out.Helper = sdk.WorkspaceHelper{Status: string(h.State), Since: h.Since, LastError: h.LastError, Problem: h.Problem}
	return out
}

// toEndpoints converts a Kubernetes workspace's declared endpoints.
func toEndpoints(eps []kube.Endpoint) []sdk.WorkspaceEndpoint {
	out := make([]sdk.WorkspaceEndpoint, 0, len(eps))
	for _, e := range eps {
		out = append(out, sdk.WorkspaceEndpoint{Name: e.Name, Container: e.Container, Port: e.Port, Exposure: e.Exposure, Path: e.Path, URL: e.URL})
	}
	return out
}

// kubeNameOf is the cluster name a kubernetes workspace shows (terraform ones have no cluster).
func kubeNameOf(w workspace.Workspace) string {
	if w.Backend == workspace.KindTerraform {
		return ""
	}
	return w.KubeName
}

func toSSHKey(k store.SSHKey) sdk.SSHKey {
	return sdk.SSHKey{ID: k.ID, Name: k.Name, Fingerprint: k.Fingerprint, PublicKey: k.PublicKey, CreatedAt: k.CreatedAt}
}

func toTemplate(t store.Template) sdk.Template {
	return sdk.Template{ID: t.ID, Name: t.Name, Kind: t.Kind, ActiveVersion: t.ActiveVersion, CreatedBy: t.CreatedBy,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, Lifecycle: toSDKLifecycle(t.Lifecycle)}
}

// toTemplateVersion converts a version of template t.
func toTemplateVersion(t store.Template, v store.TemplateVersion) sdk.TemplateVersion {
	vars := v.Variables
	if vars == nil {
		vars = []string{}
	}
	params := make([]sdk.TemplateParameter, 0, len(v.Parameters))
	for _, p := range v.Parameters {
		tp := sdk.TemplateParameter{Name: p.Name, Type: p.Type, Description: p.Description, Required: p.Required(),
			Default: p.Default, Sensitive: p.Sensitive, Mutable: p.Mutable, Validations: len(p.Validations)}
		if p.Sensitive {
			tp.Default = ""
		}
		params = append(params, tp)
	}
	return sdk.TemplateVersion{Number: v.Number, Hash: v.Hash, Variables: vars, Active: v.ID == t.ActiveVersionID, Parameters: params,
		CreatedBy: v.CreatedBy, CreatedAt: v.CreatedAt}
}

// toBuild converts a build; versions maps template version ids to their numbers.
func toBuild(b build.Build, versions map[string]int) sdk.Build {
	return sdk.Build{
		Number: b.Number, Transition: string(b.Transition), Reason: string(b.Reason), Initiator: b.InitiatorName,
		TemplateVersion: versions[b.TemplateVersionID], StateSource: string(b.StateSource), HasState: b.State != nil || b.HasState,
		StateCapturedOnCancel: b.StateCapturedOnCancel, StatePruned: b.StatePruned, Orphan: b.Orphan, LogLevel: b.LogLevel,
		IsPrebuild: b.IsPrebuild, IsPrebuildClaim: b.IsPrebuildClaim, Status: string(b.Job.Status()), Error: b.Job.Error,
		CreatedAt: b.CreatedAt, StartedAt: b.Job.StartedAt, CompletedAt: b.Job.CompletedAt, CanceledAt: b.Job.CanceledAt,
	}
}
