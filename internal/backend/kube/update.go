package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/backend"
	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/reconcile"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// The results of UpdateDefinition.
const (
	// UpToDate: the definition read again is the one the workspace has (only the commit it was
	// read at is recorded).
	UpToDate = "up-to-date"
	// NewDefinition: the definition read again is the workspace's new one (its generation moved
	// on, the agent is sent the new config: a running workspace is rolled onto it).
	NewDefinition = "definition"
)

// ErrNoRepository is an update of a Kubernetes workspace that was not made from a repository: its
// definition is the devfile it was created with, with nothing to read again.
var ErrNoRepository = errs.New(errs.Conflict, "the workspace was not created from a repository")

// errChanged is a definition written by someone else between the read and the write.
var errChanged = errs.New(errs.Conflict, "the workspace's definition changed meanwhile: run the update again")

// UpdateDefinition makes repo's definition, read again from the repository the workspace ref was
// created from (the caller reads it: internal/repodef), the workspace's: generated and checked
// against its agent's limits as at create, then written with a new definition generation and a
// new desired-state time, so that the agent is sent the new config at its next reconcile. The same
// devfile as the workspace's changes nothing but the commit recorded (UpToDate). A start never
// reads the repository: the definition is pinned until the next update.
func (s *Service) UpdateDefinition(ctx context.Context, by workspace.User, ref store.WorkspaceRef, repo Repository) (workspace.Workspace, *devfile.Devfile, string, error) {
	cur, err := s.st.Workspace(ctx, ref)
	if err != nil {
		return workspace.Workspace{}, nil, "", err
	}
	if !workspace.Visible(by, cur) {
		return workspace.Workspace{}, nil, "", backend.ErrHidden
	}
	if cur.Backend != workspace.KindKubernetes {
		return cur, nil, "", fmt.Errorf("workspace %q is a %s workspace: %w", cur.Name, cur.Backend, backend.ErrOtherBackend)
	}
	if cur.Repository == nil {
		return cur, nil, "", fmt.Errorf("workspace %q: %w", cur.Name, ErrNoRepository)
	}
	agent, err := s.st.AgentByName(ctx, cur.AgentName)
	if err != nil {
		return cur, nil, "", fmt.Errorf("read agent %s: %w", cur.AgentName, err)
	}
	// A template's workspace falls back to the devfile of its active version, as at create.
	var fallback []byte
	if cur.TemplateID != "" {
		t, err := s.st.TemplateByName(ctx, cur.TemplateName)
		if errors.Is(err, store.ErrNotFound) {
			t.ID = ""
		} else if err != nil {
			return cur, nil, "", fmt.Errorf("read template %s: %w", cur.TemplateName, err)
		}
		if t.ID != cur.TemplateID {
			return cur, nil, "", fmt.Errorf("the template %s the workspace was created with was deleted: %w", cur.TemplateName, errs.New(errs.Conflict, "template deleted"))
		}
		if fallback, err = s.templateDevfile(ctx, t, true); err != nil {
			return cur, nil, "", err
		}
	}
	text, err := repositoryDevfile(repo, fallback, cur.Name, cur.ID, agent.Config)
	if err != nil {
		return cur, nil, "", err
	}
	df, err := devfile.Parse(text)
	if err != nil {
		return cur, nil, "", err
	}
	if _, err := devfile.Generate(df, devfile.Params{WorkspaceID: cur.ID, WorkspaceName: cur.Name, KubeName: cur.KubeName, Owner: cur.OwnerName,
		AgentID: agent.ID, Namespace: cur.Namespace, DesiredState: cur.DesiredState, Agent: agent.Config}); err != nil {
		return cur, nil, "", err
	}
	old, err := s.st.WorkspaceDevfile(ctx, cur.ID)
	if err != nil {
		return cur, nil, "", err
	}
	same := bytes.Equal([]byte(old), text)
	url := ""
	if port, path, ok := df.PublicEndpoint(); ok {
		url = agent.Config.EndpointURL(port, cur.Name, cur.OwnerName, path)
	}
	result := UpToDate
	row, err := s.st.UpdateWorkspace(ctx, store.WorkspaceRef{ID: cur.ID}, func(w workspace.Workspace) (workspace.Workspace, error) {
		if w.DefinitionGeneration != cur.DefinitionGeneration {
			return w, errChanged
		}
		if w.DesiredState == workspace.Terminated {
			return w, fmt.Errorf("workspace %q: %w", w.Name, workspace.ErrTerminated)
		}
		now := s.clock.Now()
		entry := audit.From(ctx)
		entry.SetTarget(audit.Workspace(w.ID, w.OwnerName, w.Name))
		entry.Set("repository", repo.URL)
		entry.Set("commit", repo.Definition.Commit)
		entry.Set("definition_path", repo.Definition.Path)
		w.Repository = repo.source(now)
		if same {
			result = UpToDate
			entry.Set("result", UpToDate)
			return w, nil
		}
		result = NewDefinition
		entry.Set("result", NewDefinition)
		entry.Set("definition_generation", w.DefinitionGeneration+1)
		w.Devfile, w.URL, w.DefinitionGeneration = string(text), url, w.DefinitionGeneration+1
		// A new time for the desired state: the agent is sent the config of the new definition.
		w.DesiredStateUpdatedAt = reconcile.UserChangeTime(w, now)
		return w, nil
	})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return cur, nil, "", backend.ErrHidden
		}
		return cur, nil, "", err
	}
	if result == NewDefinition {
		s.devfiles.put(row.ID, row.DefinitionGeneration, df)
		s.traces.record(ctx, row.KubeName)
		s.log.Info("workspace definition updated", "workspace", row.Name, "owner", row.OwnerName, "commit", repo.Definition.Commit,
			"path", repo.Definition.Path, "generation", row.DefinitionGeneration)
	}
	return row, df, result, nil
}
