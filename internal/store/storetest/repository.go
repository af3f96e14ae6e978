package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// testWorkspaceRepository: a workspace created from a repository keeps its source (URL, ref,
// devcontainer path, the commit and file its definition was read at), read back with it; a new
// definition (UpdateWorkspace with a devfile) is written with its generation and URL; a devfile without a new generation is
// refused and nothing is written; a workspace without a repository reads none.
func testWorkspaceRepository(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "repo")
	plain := f.Workspace("plain")
	w := f.Workspace("app")
	src := workspace.RepositorySource{URL: "https://git.example.com/team/app.git", Ref: "main", DevcontainerPath: ".devcontainer/go/devcontainer.json",
		Commit: strings.Repeat("a", 40), DefinitionPath: ".devcontainer/go/devcontainer.json", ReadAt: t0.Add(time.Second)}
	w.Repository = &src
	f.Create(t, s, plain, w)

	got, err := s.Workspace(ctx, f.Ref("app"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Repository == nil || *got.Repository != src || got.DefinitionGeneration != 1 {
		t.Fatalf("read back repository %+v generation %d; want %+v generation 1", got.Repository, got.DefinitionGeneration, src)
	}
	if p, err := s.Workspace(ctx, f.Ref("plain")); err != nil || p.Repository != nil || p.DefinitionGeneration != 1 {
		t.Fatalf("workspace without a repository: %+v generation %d, %v", p.Repository, p.DefinitionGeneration, err)
	}
	list, err := s.ListWorkspaces(ctx, store.ListFilter{OwnerID: f.User.ID})
	if err != nil || len(list) != 2 {
		t.Fatalf("ListWorkspaces = %d, %v", len(list), err)
	}
	for _, l := range list {
		if (l.Name == "app") != (l.Repository != nil) {
			t.Fatalf("listed %s with repository %+v", l.Name, l.Repository)
		}
	}

	// A devfile without a new generation is refused, and nothing of the change is written.
	_, err = s.UpdateWorkspace(ctx, f.Ref("app"), func(cur workspace.Workspace) (workspace.Workspace, error) {
		cur.Devfile, cur.ErrorMessage = "schemaVersion: 2.3.0", "should not stay"
		return cur, nil
	})
	if err == nil || !strings.Contains(err.Error(), "generation") {
		t.Fatalf("devfile without a new generation: %v, want an error naming the generation", err)
	}
	if text, _ := s.WorkspaceDevfile(ctx, w.ID); text != w.Devfile {
		t.Fatalf("devfile after a refused update = %q, want %q", text, w.Devfile)
	}
	if cur, _ := s.Workspace(ctx, f.Ref("app")); cur.ErrorMessage != "" {
		t.Fatalf("a refused update wrote error_message %q", cur.ErrorMessage)
	}

	// A new definition: devfile, URL, generation and source together.
	at := t0.Add(time.Minute)
	next := src
	next.Commit, next.DefinitionPath, next.ReadAt = strings.Repeat("b", 40), ".devfile.yaml", at
	updated, err := s.UpdateWorkspace(ctx, f.Ref("app"), func(cur workspace.Workspace) (workspace.Workspace, error) {
		if cur.Repository == nil || *cur.Repository != src {
			return cur, errors.New("fn did not get the stored repository")
		}
		cur.Devfile, cur.URL, cur.DefinitionGeneration = "schemaVersion: 2.3.0\n", "https://8080-app.example.com/", cur.DefinitionGeneration+1
		cur.Repository = &next
		cur.DesiredStateUpdatedAt = at
		return cur, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if updated.DefinitionGeneration != 2 {
		t.Fatalf("UpdateWorkspace returned generation %d", updated.DefinitionGeneration)
	}
	got, err = s.Workspace(ctx, f.Ref("app"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Repository == nil || *got.Repository != next || got.DefinitionGeneration != 2 || got.URL != "https://8080-app.example.com/" || !got.DesiredStateUpdatedAt.Equal(at) {
		t.Fatalf("after the update: repository %+v generation %d url %q desired at %v", got.Repository, got.DefinitionGeneration, got.URL, got.DesiredStateUpdatedAt)
	}
	if text, err := s.WorkspaceDevfile(ctx, w.ID); err != nil || text != "schemaVersion: 2.3.0\n" {
		t.Fatalf("WorkspaceDevfile after the update = %q, %v", text, err)
	}

	// The source alone (the same definition at a newer commit): no new devfile, generation stays.
	again := next
	again.Commit, again.ReadAt = strings.Repeat("c", 40), at.Add(time.Minute)
	if _, err := s.UpdateWorkspace(ctx, f.Ref("app"), func(cur workspace.Workspace) (workspace.Workspace, error) {
		cur.Repository = &again
		return cur, nil
	}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Workspace(ctx, f.Ref("app"))
	if got.Repository == nil || *got.Repository != again || got.DefinitionGeneration != 2 {
		t.Fatalf("after recording the commit: %+v generation %d", got.Repository, got.DefinitionGeneration)
	}
	if text, _ := s.WorkspaceDevfile(ctx, w.ID); text != "schemaVersion: 2.3.0\n" {
		t.Fatalf("devfile changed without a new definition: %q", text)
	}
	// Another workspace's row is untouched.
	if p, _ := s.Workspace(ctx, f.Ref("plain")); p.Repository != nil || p.DefinitionGeneration != 1 {
		t.Fatalf("the other workspace changed: %+v %d", p.Repository, p.DefinitionGeneration)
	}
}

// testWorkspaceDotfiles: the dotfiles status a helper reports is kept per workspace, the latest
// replacing the one before, read back as written; none reported is ErrNotFound; a report for a
// workspace that does not exist is ErrNotFound and writes nothing; a deleted workspace takes it
// along.
func testWorkspaceDotfiles(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "dots")
	w := f.Workspace("dots")
	f.Create(t, s, w)
	if _, err := s.WorkspaceDotfiles(ctx, w.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("before any report: %v, want ErrNotFound", err)
	}
	installing := workspace.DotfilesStatus{State: "installing", Repository: "https://git.example.com/a/dots.git#main", UpdatedAt: t0}
	if err := s.SetWorkspaceDotfiles(ctx, w.ID, installing); err != nil {
		t.Fatal(err)
	}
	if got, err := s.WorkspaceDotfiles(ctx, w.ID); err != nil || got != installing {
		t.Fatalf("read back %+v, %v; want %+v", got, err, installing)
	}
	failed := workspace.DotfilesStatus{State: "failed", Repository: installing.Repository, Script: "install.sh", Error: "install.sh: exit status 3",
		Log: "dotfiles: running install.sh\nno such file: é\n", UpdatedAt: t0.Add(time.Minute)}
	if err := s.SetWorkspaceDotfiles(ctx, w.ID, failed); err != nil {
		t.Fatal(err)
	}
	if got, err := s.WorkspaceDotfiles(ctx, w.ID); err != nil || got != failed {
		t.Fatalf("read back %+v, %v; want %+v", got, err, failed)
	}
	if err := s.SetWorkspaceDotfiles(ctx, "00000000-0000-0000-0000-000000000000", failed); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a report for no workspace: %v, want ErrNotFound", err)
	}
}
