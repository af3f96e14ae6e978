package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/parameter"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// testTemplateVersions: a version pushed inactive leaves the active one; promote moves it; versions
// are read by number with or without their archive and keep their parameters; a workspace records
// its latest build's version (outdated once another is active) and its parameter values.
func testTemplateVersions(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "vers")
	// The first version of a new template is active even when pushed inactive.
	first, v1, err := s.CreateTemplateVersion(ctx, store.Template{ID: uuid.NewString(), Name: "fresh", Kind: workspace.KindTerraform, CreatedBy: f.User.ID, CreatedAt: t0},
		store.TemplateVersion{ID: uuid.NewString(), Archive: []byte("v1"), CreatedBy: f.User.ID, CreatedAt: t0, Inactive: true})
	if err != nil || first.ActiveVersionID != v1.ID || first.ActiveVersion != 1 {
		t.Fatalf("first version pushed inactive: %+v %+v %v; want it active", first, v1, err)
	}

	params := []parameter.Parameter{
		{Name: "size", Type: "number", TypeJSON: []byte(`"number"`), HasDefault: true, Default: "1", Mutable: true},
		{Name: "token", Type: "string", TypeJSON: []byte(`"string"`), Sensitive: true,
			Validations: []parameter.Validation{{Condition: `length(var.token) > 3`, ErrorMessage: "too short"}}},
	}
	at := t0.Add(time.Minute)
	tmpl, v2, err := s.CreateTemplateVersion(ctx, store.Template{ID: uuid.NewString(), Name: f.Template.Name, Kind: workspace.KindTerraform, CreatedBy: f.User.ID, CreatedAt: at},
		store.TemplateVersion{ID: uuid.NewString(), Archive: []byte("module v2"), Parameters: params, CreatedBy: f.User.ID, CreatedAt: at, Inactive: true})
	if err != nil {
		t.Fatal(err)
	}
	if v2.Number != 2 || tmpl.ActiveVersionID != f.Version.ID || tmpl.ActiveVersion != 1 {
		t.Fatalf("version 2 pushed inactive: template %+v version %+v; want version 1 still active", tmpl, v2)
	}
	if got, err := s.TemplateByName(ctx, f.Template.Name); err != nil || got.ActiveVersionID != f.Version.ID {
		t.Fatalf("template after an inactive push = %+v, %v", got, err)
	}
	got, err := s.TemplateVersionByNumber(ctx, tmpl.ID, 2, true)
	if err != nil || got.ID != v2.ID || string(got.Archive) != "module v2" || !slices.EqualFunc(got.Parameters, params, sameParameter) {
		t.Fatalf("version 2 by number = %+v, %v", got, err)
	}
	if got, err := s.TemplateVersionByNumber(ctx, tmpl.ID, 2, false); err != nil || got.Archive != nil || len(got.Parameters) != 2 {
		t.Fatalf("version 2 by number without archive = %+v, %v", got, err)
	}
	if got, err := s.TemplateVersionInfo(ctx, v2.ID); err != nil || got.Archive != nil || got.Number != 2 || !got.Parameters[1].Sensitive {
		t.Fatalf("version 2 info = %+v, %v", got, err)
	}
	if _, err := s.TemplateVersionByNumber(ctx, tmpl.ID, 9, false); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("version 9 = %v, want ErrNotFound", err)
	}

	// A workspace on version 1, with parameter values.
	w := f.TerraformWorkspace("vm")
	w.Parameters = []workspace.ParameterValue{{Name: "size", Value: "2"}, {Name: "token", Value: "s3cret", Sensitive: true}}
	b1 := f.Build(w, 1, build.Start, t0)
	if err := s.CreateBuildWorkspace(ctx, w, b1); err != nil {
		t.Fatal(err)
	}
	read, err := s.Workspace(ctx, store.WorkspaceRef{ID: w.ID})
	if err != nil || read.TemplateVersionID != f.Version.ID || read.TemplateVersion != 1 || read.TemplateActiveVersionID != f.Version.ID ||
		!slices.Equal(read.Parameters, w.Parameters) {
		t.Fatalf("workspace after create = %+v, %v", read, err)
	}

	// Promote version 2: the workspace is now outdated (its version is not the active one).
	if _, err := s.PromoteTemplateVersion(ctx, f.Template.Name, 9, at); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("promote version 9 = %v, want ErrNotFound", err)
	}
	if _, err := s.PromoteTemplateVersion(ctx, "nope", 1, at); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("promote of a missing template = %v, want ErrNotFound", err)
	}
	tmpl, err = s.PromoteTemplateVersion(ctx, f.Template.Name, 2, at)
	if err != nil || tmpl.ActiveVersionID != v2.ID || tmpl.ActiveVersion != 2 {
		t.Fatalf("promote version 2 = %+v, %v", tmpl, err)
	}
	ws, err := s.ListWorkspaces(ctx, store.ListFilter{OwnerID: f.User.ID})
	if err != nil || len(ws) != 1 || ws[0].TemplateVersionID != f.Version.ID || ws[0].TemplateActiveVersionID != v2.ID {
		t.Fatalf("listed after the promote = %+v, %v; want version 1 of a template whose active is 2", ws, err)
	}

	// A build on version 2 moves the workspace to it, with the values its transaction writes.
	finish(t, s, acquire(t, s, "w1", at).Job.ID, build.Outcome{State: []byte(`{"version":4}`)}, at)
	nw, nb, err := s.NewBuild(ctx, store.WorkspaceRef{ID: w.ID}, func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
		b := f.Build(rec.Workspace, 2, build.Start, at)
		b.TemplateVersionID = v2.ID
		nw := afterBuild(rec.Workspace, b, at)
		nw.Parameters = []workspace.ParameterValue{{Name: "size", Value: "3"}, {Name: "token", Value: "s3cret", Sensitive: true}}
		return nw, &b, nil
	})
	if err != nil || nb == nil || nw.TemplateVersionID != v2.ID || nw.TemplateVersion != 2 {
		t.Fatalf("NewBuild on version 2 = %+v, %v", nw, err)
	}
	read, err = s.Workspace(ctx, store.WorkspaceRef{ID: w.ID})
	if err != nil || read.TemplateVersionID != v2.ID || read.TemplateVersion != 2 || read.TemplateActiveVersionID != v2.ID ||
		read.Parameters[0].Value != "3" {
		t.Fatalf("workspace after a build on version 2 = %+v, %v", read, err)
	}
	// A build's end (UpdateBuild) keeps both.
	finish(t, s, acquire(t, s, "w1", at).Job.ID, build.Outcome{State: []byte(`{"version":4}`)}, at)
	if read, err = s.Workspace(ctx, store.WorkspaceRef{ID: w.ID}); err != nil || read.TemplateVersionID != v2.ID || len(read.Parameters) != 2 {
		t.Fatalf("workspace after the build ended = %+v, %v", read, err)
	}
}

func sameParameter(a, b parameter.Parameter) bool {
	return a.Name == b.Name && a.Type == b.Type && string(a.TypeJSON) == string(b.TypeJSON) && a.HasDefault == b.HasDefault &&
		a.Default == b.Default && a.Sensitive == b.Sensitive && a.Mutable == b.Mutable && slices.Equal(a.Validations, b.Validations)
}
