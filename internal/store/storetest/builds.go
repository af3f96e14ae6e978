package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// buildTests are the cases of the Terraform backend's persistence (store.BuildStore).
var buildTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"Templates", testTemplates},
	{"TemplateFirstPushRace", testTemplateFirstPushRace},
	{"TemplateVersions", testTemplateVersions},
	{"TerraformWorkspace", testTerraformWorkspace},
	{"NewBuild", testNewBuild},
	{"UpdateBuildRoundTrip", testUpdateBuildRoundTrip},
	{"AcquireJobOrder", testAcquireJobOrder},
	{"AcquireJobConcurrent", testAcquireJobConcurrent},
	{"Heartbeat", testHeartbeat},
	{"Logs", testLogs},
	{"StaleJobs", testStaleJobs},
	{"ActiveJobsOf", testActiveJobsOf},
	{"CountJobs", testCountJobs},
	{"PutBuildState", testPutBuildState},
	{"StateRetention", testStateRetention},
	{"Storage", testStorage},
	{"Provisioners", testProvisioners},
	{"JobNotifications", testJobNotifications},
}

// BuildFixture holds a user (with an agent, from Fixture) and a terraform template to hang
// terraform workspaces on.
type BuildFixture struct {
	Fixture
	Template store.Template
	Version  store.TemplateVersion
}

// NewBuildFixture creates a user, an agent and a terraform template "tf-<name>" with one version.
func NewBuildFixture(t testing.TB, s store.Store, name string) BuildFixture {
	t.Helper()
	f := BuildFixture{Fixture: NewFixture(t, s, name)}
	var err error
	f.Template, f.Version, err = s.CreateTemplateVersion(context.Background(),
		store.Template{ID: uuid.NewString(), Name: "tf-" + name, Kind: workspace.KindTerraform, CreatedBy: f.User.ID, CreatedAt: t0},
		store.TemplateVersion{ID: uuid.NewString(), Archive: []byte("module " + name), Variables: []string{"region"}, CreatedBy: f.User.ID, CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TerraformWorkspace returns a new terraform workspace row, desired Running, actual Starting.
func (f BuildFixture) TerraformWorkspace(name string) workspace.Workspace {
	return workspace.Workspace{
		ID: uuid.NewString(), Name: name, OwnerID: f.User.ID, OwnerName: f.User.Username, DesiredState: workspace.Running,
		ActualState: workspace.Starting, DesiredStateUpdatedAt: t0, CreatedAt: t0,
		Backend: workspace.KindTerraform, TemplateID: f.Template.ID, TemplateName: f.Template.Name,
	}
}

// Build returns build number n of w, with a pending job created at at.
func (f BuildFixture) Build(w workspace.Workspace, n int, tr build.Transition, at time.Time) build.Build {
	id := uuid.NewString()
	return build.Build{
		ID: id, WorkspaceID: w.ID, Number: n, Transition: tr, Reason: build.ReasonInitiator, InitiatorID: f.User.ID,
		TemplateVersionID: f.Version.ID, StateSource: build.SourceNone, CreatedAt: at,
		Job: build.Job{ID: uuid.NewString(), BuildID: id, CreatedAt: at},
	}
}

// Create inserts a terraform workspace with its first build (a start, pending, created at at).
func (f BuildFixture) Create(t testing.TB, s store.Store, name string, at time.Time) (workspace.Workspace, build.Build) {
	t.Helper()
	w := f.TerraformWorkspace(name)
	b := f.Build(w, 1, build.Start, at)
	if err := s.CreateBuildWorkspace(context.Background(), w, b); err != nil {
		t.Fatal(err)
	}
	return w, b
}

// setJob writes the job of jobID as fn changes it (any columns), through UpdateBuild.
func setJob(t testing.TB, s store.Store, jobID string, fn func(j *build.Job)) build.Build {
	t.Helper()
	rec, err := s.UpdateBuild(context.Background(), jobID, func(rec store.BuildRecord) (store.BuildRecord, error) {
		fn(&rec.Build.Job)
		return rec, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return *rec.Build
}

// finish ends the job by the build rules (build.Finish, build.WorkspaceAfter), as a provisioner's
// report does.
func finish(t testing.TB, s store.Store, jobID string, o build.Outcome, at time.Time) store.BuildRecord {
	t.Helper()
	rec, err := s.UpdateBuild(context.Background(), jobID, func(rec store.BuildRecord) (store.BuildRecord, error) {
		b := build.Finish(*rec.Build, o, at)
		rec.Build = &b
		rec.Workspace = afterBuild(rec.Workspace, b, at)
		return rec, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func afterBuild(w workspace.Workspace, b build.Build, at time.Time) workspace.Workspace {
	prev := time.Time{}
	if w.ActualStateUpdatedAt != nil {
		prev = *w.ActualStateUpdatedAt
	}
	st := build.WorkspaceAfter(build.WorkspaceState{Desired: w.DesiredState, Actual: w.ActualState, ActualAt: prev,
		ErrorType: w.ErrorType, ErrorMessage: w.ErrorMessage}, b, at)
	w.DesiredState, w.ActualState, w.ErrorType, w.ErrorMessage = st.Desired, st.Actual, st.ErrorType, st.ErrorMessage
	if !st.ActualAt.IsZero() {
		w.ActualStateUpdatedAt = &st.ActualAt
	}
	return w
}

// acquire claims the oldest pending job for worker at at, failing if there is none.
func acquire(t testing.TB, s store.Store, worker string, at time.Time) build.Build {
	t.Helper()
	b, ok, err := s.AcquireJob(context.Background(), worker, at)
	if err != nil || !ok {
		t.Fatalf("AcquireJob(%s) = %v, %v; want a job", worker, ok, err)
	}
	return b
}

func testTemplates(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "tpl")
	tmpl := store.Template{ID: uuid.NewString(), Name: "docker", Kind: workspace.KindTerraform, CreatedBy: f.User.ID, CreatedAt: t0}
	archive := []byte("gzipped tar \x00\x01\x02")
	got, v1, err := s.CreateTemplateVersion(ctx, tmpl, store.TemplateVersion{ID: uuid.NewString(), Archive: archive,
		Variables: []string{"image", "region"}, CreatedBy: f.User.ID, CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(archive)
	if got.ID != tmpl.ID || got.ActiveVersion != 1 || got.ActiveVersionID != v1.ID || v1.Number != 1 || v1.TemplateID != tmpl.ID ||
		v1.Hash != hex.EncodeToString(sum[:]) {
		t.Fatalf("first version: template %+v, version %+v", got, v1)
	}
	// The second push: a new version of the same template (the id passed is ignored).
	at := t0.Add(time.Hour)
	got, v2, err := s.CreateTemplateVersion(ctx, store.Template{ID: uuid.NewString(), Name: "docker", Kind: workspace.KindTerraform, CreatedBy: f.User.ID, CreatedAt: at},
		store.TemplateVersion{ID: uuid.NewString(), Archive: []byte("v2"), CreatedBy: f.User.ID, CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != tmpl.ID || got.ActiveVersion != 2 || v2.Number != 2 || v2.TemplateID != tmpl.ID || !got.UpdatedAt.Equal(at) {
		t.Fatalf("second version: template %+v, version %+v", got, v2)
	}
	// Another kind under the same name is refused, and writes nothing.
	if _, _, err := s.CreateTemplateVersion(ctx, store.Template{ID: uuid.NewString(), Name: "docker", Kind: workspace.KindKubernetes, CreatedBy: f.User.ID, CreatedAt: at},
		store.TemplateVersion{ID: uuid.NewString(), Archive: []byte("schemaVersion: 2.2.0"), CreatedBy: f.User.ID, CreatedAt: at}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("another kind: %v, want ErrConflict", err)
	}
	read, err := s.TemplateByName(ctx, "docker")
	if err != nil || read.ActiveVersion != 2 || read.ActiveVersionID != v2.ID || read.Kind != workspace.KindTerraform || read.CreatedBy != f.User.ID ||
		!read.CreatedAt.Equal(t0) || !read.UpdatedAt.Equal(at) {
		t.Fatalf("TemplateByName = %+v, %v", read, err)
	}
	if _, err := s.TemplateByName(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown template: %v, want ErrNotFound", err)
	}
	// A kubernetes template of another name lives alongside.
	if _, _, err := s.CreateTemplateVersion(ctx, store.Template{ID: uuid.NewString(), Name: "devfile", Kind: workspace.KindKubernetes, CreatedBy: f.User.ID, CreatedAt: at},
		store.TemplateVersion{ID: uuid.NewString(), Archive: []byte("schemaVersion: 2.2.0"), CreatedBy: f.User.ID, CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListTemplates(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "devfile" || list[1].Name != "docker" || list[1].ActiveVersion != 2 {
		t.Fatalf("ListTemplates = %+v, %v", list, err)
	}
	versions, err := s.ListTemplateVersions(ctx, tmpl.ID)
	if err != nil || len(versions) != 2 || versions[0].Number != 2 || versions[1].Number != 1 {
		t.Fatalf("ListTemplateVersions = %+v, %v", versions, err)
	}
	if versions[1].Archive != nil || !slices.Equal(versions[1].Variables, []string{"image", "region"}) || versions[1].CreatedBy != f.User.ID ||
		!versions[1].CreatedAt.Equal(t0) || versions[1].Hash != v1.Hash {
		t.Fatalf("listed version 1: %+v", versions[1])
	}
	full, err := s.TemplateVersionByID(ctx, v1.ID)
	if err != nil || !bytes.Equal(full.Archive, archive) || full.Number != 1 || !slices.Equal(full.Variables, []string{"image", "region"}) {
		t.Fatalf("TemplateVersionByID = %+v, %v", full, err)
	}
	if v, err := s.TemplateVersionByID(ctx, v2.ID); err != nil || len(v.Variables) != 0 || v.Variables == nil {
		t.Fatalf("a version without variables: %+v, %v", v, err)
	}
	if _, err := s.TemplateVersionByID(ctx, uuid.NewString()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown version: %v, want ErrNotFound", err)
	}
}

// testTemplateFirstPushRace: concurrent first pushes of one name make one template with distinct
// version numbers, none refused.
func testTemplateFirstPushRace(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "race")
	const n = 4
	var wg sync.WaitGroup
	numbers := make(chan int, n)
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, v, err := s.CreateTemplateVersion(ctx, store.Template{ID: uuid.NewString(), Name: "raced", Kind: workspace.KindTerraform, CreatedBy: f.User.ID, CreatedAt: t0},
				store.TemplateVersion{ID: uuid.NewString(), Archive: []byte(fmt.Sprint(i)), CreatedBy: f.User.ID, CreatedAt: t0})
			if err != nil {
				errs <- err
				return
			}
			numbers <- v.Number
		}()
	}
	wg.Wait()
	close(errs)
	close(numbers)
	for err := range errs {
		t.Fatal(err)
	}
	var got []int
	for n := range numbers {
		got = append(got, n)
	}
	slices.Sort(got)
	if !slices.Equal(got, []int{1, 2, 3, 4}) {
		t.Fatalf("version numbers %v, want 1..4", got)
	}
	if list, _ := s.ListTemplates(ctx); len(list) != 1 || list[0].ActiveVersion == 0 {
		t.Fatalf("templates: %+v", list)
	}
}

func testTerraformWorkspace(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "tw")
	w, b := f.Create(t, s, "tf1", t0)
	k := f.Workspace("k1")
	f.Fixture.Create(t, s, k)

	got, err := s.Workspace(ctx, f.Ref("tf1"))
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != w.ID || got.Backend != workspace.KindTerraform || got.AgentID != "" || got.AgentName != "" || got.Namespace != "" ||
		got.TemplateID != f.Template.ID || got.TemplateName != f.Template.Name || got.OwnerName != f.User.Username ||
		got.DesiredState != workspace.Running || got.ActualState != workspace.Starting || got.RespondedToAgentAt != nil {
		t.Fatalf("terraform workspace read back: %+v", got)
	}
	if byID, err := s.WorkspaceByID(ctx, w.ID); err != nil || byID.Name != "tf1" || byID.TemplateName != f.Template.Name {
		t.Fatalf("WorkspaceByID = %+v, %v", byID, err)
	}
	if _, err := s.WorkspaceByID(ctx, uuid.NewString()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("WorkspaceByID(unknown): %v", err)
	}
	if kw, err := s.Workspace(ctx, f.Ref("k1")); err != nil || kw.Backend != workspace.KindKubernetes || kw.AgentName != f.Agent.Name || kw.TemplateID != "" {
		t.Fatalf("kubernetes workspace read back: %+v, %v", kw, err)
	}
	list, err := s.ListWorkspaces(ctx, store.ListFilter{OwnerID: f.User.ID})
	if err != nil || len(list) != 2 || list[0].Name != "k1" || list[1].Name != "tf1" || list[1].Backend != workspace.KindTerraform {
		t.Fatalf("ListWorkspaces = %+v, %v", list, err)
	}
	if all, _ := s.ListWorkspaces(ctx, store.ListFilter{}); len(all) != 2 {
		t.Fatalf("ListWorkspaces(all) = %d", len(all))
	}
	if first, err := s.BuildByNumber(ctx, w.ID, 1); err != nil || first.ID != b.ID || first.Job.ID != b.Job.ID || first.Job.Status() != build.Pending {
		t.Fatalf("first build: %+v, %v", first, err)
	}

	// Never read by an agent's reconcile (it never answered it), nor pending for any agent.
	for _, full := range []bool{false, true} {
		if err := s.Reconcile(ctx, store.ReconcileScope{AgentID: f.Agent.ID, Full: full, KubeNames: []string{"tf1"}}, func(_ store.ReconcileTx, rows []workspace.Workspace) ([]workspace.Workspace, error) {
			if names := names(rows); len(names) != 1 || !names["k1"] {
				t.Errorf("reconcile (full %v) read %v, want only k1", full, names)
			}
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	at := t0.Add(time.Minute)
	if _, err := s.UpdateWorkspace(ctx, f.Ref("k1"), func(w workspace.Workspace) (workspace.Workspace, error) {
		w.RespondedToAgentAt = &at
		return w, nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, agent := range []string{f.Agent.ID, ""} {
		if p, err := s.HasPending(ctx, agent); err != nil || p {
			t.Fatalf("HasPending(%q) = %v, %v; want false (only the terraform workspace was never answered)", agent, p, err)
		}
	}
	// Quotas count the agent's workspaces only.
	if err := s.CreateWorkspace(ctx, f.Workspace("k2"), 2, 2); err != nil {
		t.Fatalf("quota of 2 with one kubernetes and one terraform workspace: %v", err)
	}

	// UpdateWorkspace serves a terraform workspace too (no agent to lock or wake).
	if _, err := s.UpdateWorkspace(ctx, f.Ref("tf1"), func(w workspace.Workspace) (workspace.Workspace, error) {
		w.DesiredState, w.DesiredStateUpdatedAt = workspace.Stopped, at
		return w, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Workspace(ctx, f.Ref("tf1")); got.DesiredState != workspace.Stopped || got.Backend != workspace.KindTerraform {
		t.Fatalf("after UpdateWorkspace: %+v", got)
	}

	// Names are shared by both backends.
	dup := f.TerraformWorkspace("k1")
	if err := s.CreateBuildWorkspace(ctx, dup, f.Build(dup, 1, build.Start, t0)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("terraform workspace named like a kubernetes one: %v, want ErrConflict", err)
	}
	// A kubernetes workspace has no builds: fn sees it (and may refuse first), a build is refused.
	if _, _, err := s.NewBuild(ctx, f.Ref("k1"), func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
		if rec.Workspace.Backend != workspace.KindKubernetes || rec.Build != nil {
			t.Errorf("fn saw %+v, %+v", rec.Workspace, rec.Build)
		}
		nb := f.Build(rec.Workspace, 1, build.Start, t0)
		return rec.Workspace, &nb, nil
	}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("NewBuild of a kubernetes workspace: %v, want ErrConflict", err)
	}
	if kw, _ := s.Workspace(ctx, f.Ref("k1")); kw.Backend != workspace.KindKubernetes {
		t.Fatalf("k1 after a refused build: %+v", kw)
	}
	if _, _, err := s.NewBuild(ctx, f.Ref("nope"), func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
		return rec.Workspace, nil, nil
	}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("NewBuild of an unknown workspace: %v, want ErrNotFound", err)
	}
	if bs, err := s.ListBuilds(ctx, w.ID); err != nil || len(bs) != 1 {
		t.Fatalf("ListBuilds = %d, %v; want the first build only", len(bs), err)
	}
	counts, err := s.CountWorkspacesByState(ctx)
	if err != nil || counts[[2]workspace.State{workspace.Stopped, workspace.Starting}] != 1 {
		t.Fatalf("CountWorkspacesByState = %v, %v", counts, err)
	}
}

func testNewBuild(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "nb")
	w, b1 := f.Create(t, s, "tf", t0)

	// fn's error writes nothing.
	refused := errors.New("refused")
	var seen store.BuildRecord
	if _, _, err := s.NewBuild(ctx, f.Ref("tf"), func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
		seen = rec
		nb := f.Build(rec.Workspace, rec.Build.Number+1, build.Stop, t0.Add(time.Second))
		rec.Workspace.DesiredState = workspace.Stopped
		return rec.Workspace, &nb, refused
	}); !errors.Is(err, refused) {
		t.Fatalf("NewBuild with fn error: %v", err)
	}
	if seen.Build == nil || seen.Build.ID != b1.ID || seen.Workspace.ID != w.ID || seen.Build.InitiatorName != f.User.Username {
		t.Fatalf("fn saw %+v", seen)
	}
	// fn sees the template's active version, read in the transaction (a start builds on it).
	if seen.ActiveVersion.ID != f.Version.ID || seen.ActiveVersion.Number != f.Version.Number {
		t.Fatalf("fn saw active version %+v, want %+v", seen.ActiveVersion, f.Version)
	}
	if bs, _ := s.ListBuilds(ctx, w.ID); len(bs) != 1 {
		t.Fatalf("%d builds after a refused NewBuild, want 1", len(bs))
	}
	if got, _ := s.Workspace(ctx, f.Ref("tf")); got.DesiredState != workspace.Running {
		t.Fatalf("a refused NewBuild wrote the workspace: %s", got.DesiredState)
	}
	// No build: nothing written either.
	if _, nb, err := s.NewBuild(ctx, f.Ref("tf"), func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
		rec.Workspace.DesiredState = workspace.Stopped
		return rec.Workspace, nil, nil
	}); err != nil || nb != nil {
		t.Fatalf("NewBuild without build = %v, %v", nb, err)
	}
	if got, _ := s.Workspace(ctx, f.Ref("tf")); got.DesiredState != workspace.Running {
		t.Fatalf("NewBuild without a build wrote the workspace: %s", got.DesiredState)
	}

	state1 := []byte(`{"version":4,"serial":1}`)
	acquire(t, s, "w1", t0.Add(time.Second))
	finish(t, s, b1.Job.ID, build.Outcome{State: state1}, t0.Add(2*time.Second))

	// Build numbers follow the latest; fn sees the latest build with its state.
	for i, tr := range []build.Transition{build.Stop, build.Start, build.Delete} {
		at := t0.Add(time.Duration(10+i) * time.Minute)
		gotW, gotB, err := s.NewBuild(ctx, f.Ref("tf"), func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
			if rec.Build == nil || rec.Build.Number != i+1 || !bytes.Equal(rec.Build.State, state1) {
				return rec.Workspace, nil, fmt.Errorf("fn saw latest build %+v", rec.Build)
			}
			nb := f.Build(rec.Workspace, rec.Build.Number+1, tr, at)
			nb.State, nb.StateSource = build.InitialState(false, nil, rec.Build)
			rec.Workspace.DesiredState, rec.Workspace.DesiredStateUpdatedAt = build.Desired(tr), at
			rec.Workspace.ActualState = build.Actual(nb)
			return rec.Workspace, &nb, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if gotB == nil || gotB.Number != i+2 || gotB.InitiatorName != f.User.Username || gotW.DesiredState != build.Desired(tr) {
			t.Fatalf("NewBuild %s = %+v, %+v", tr, gotW, gotB)
		}
		if i < 2 {
			acquire(t, s, "w1", at)
			finish(t, s, gotB.Job.ID, build.Outcome{State: state1}, at.Add(time.Second))
		}
	}
	got, err := s.Workspace(ctx, f.Ref("tf"))
	if err != nil || got.DesiredState != workspace.Terminated || got.ActualState != workspace.Terminating ||
		!got.DesiredStateUpdatedAt.Equal(t0.Add(12*time.Minute)) {
		t.Fatalf("workspace after the delete build: %+v, %v", got, err)
	}
	bs, err := s.ListBuilds(ctx, w.ID)
	if err != nil || len(bs) != 4 {
		t.Fatalf("ListBuilds = %d, %v", len(bs), err)
	}
	for i, b := range bs {
		if b.Number != 4-i || b.State != nil || !b.HasState || b.InitiatorName != f.User.Username || b.Job.ID == "" {
			t.Fatalf("listed build %d: %+v", i, b)
		}
		if b.Number > 1 && b.StateSource != build.SourcePrevious {
			t.Fatalf("build #%d state source %s", b.Number, b.StateSource)
		}
	}
	latest, err := s.BuildByNumber(ctx, w.ID, 0)
	if err != nil || latest.Number != 4 || latest.Transition != build.Delete || !bytes.Equal(latest.State, state1) || latest.StateSource != build.SourcePrevious {
		t.Fatalf("BuildByNumber(0) = %+v, %v", latest, err)
	}
	if two, err := s.BuildByNumber(ctx, w.ID, 2); err != nil || two.Transition != build.Stop || two.Job.Status() != build.Succeeded {
		t.Fatalf("BuildByNumber(2) = %+v, %v", two, err)
	}
	if _, err := s.BuildByNumber(ctx, w.ID, 9); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("BuildByNumber(9): %v, want ErrNotFound", err)
	}
	if _, err := s.BuildByNumber(ctx, uuid.NewString(), 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("BuildByNumber of an unknown workspace: %v, want ErrNotFound", err)
	}

	// A number taken (a racing replica's build) is ErrConflict, and writes nothing.
	if _, _, err := s.NewBuild(ctx, f.Ref("tf"), func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
		nb := f.Build(rec.Workspace, rec.Build.Number, build.Start, t0.Add(time.Hour))
		rec.Workspace.DesiredState = workspace.Running
		return rec.Workspace, &nb, nil
	}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a taken build number: %v, want ErrConflict", err)
	}
	if got, _ := s.Workspace(ctx, f.Ref("tf")); got.DesiredState != workspace.Terminated {
		t.Fatalf("a conflicting NewBuild wrote the workspace: %s", got.DesiredState)
	}
}

func testUpdateBuildRoundTrip(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "ub")
	w, b := f.Create(t, s, "tf", t0)
	big := make([]byte, 5<<20)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	ts := func(us int) *time.Time { v := t0.Add(time.Duration(us) * time.Microsecond); return &v }
	actualAt := ts(7_000_007)
	rec, err := s.UpdateBuild(ctx, b.Job.ID, func(rec store.BuildRecord) (store.BuildRecord, error) {
		if rec.Build.ID != b.ID || rec.Workspace.ID != w.ID || rec.Build.State != nil || rec.Build.InitiatorName != f.User.Username {
			return rec, fmt.Errorf("fn saw %+v", rec)
		}
		rec.Build.State, rec.Build.StateCapturedOnCancel = big, true
		j := &rec.Build.Job
		j.WorkerID, j.StartedAt, j.HeartbeatAt, j.CanceledAt, j.CompletedAt, j.Error = "worker-1", ts(1_000_001), ts(2_000_002), ts(3_000_003), ts(4_000_004), "interrupted"
		rec.Workspace.ActualState, rec.Workspace.ActualStateUpdatedAt = workspace.Failed, actualAt
		rec.Workspace.ErrorType, rec.Workspace.ErrorMessage = build.ErrorType, "build #1 (start) was canceled: interrupted"
		return rec, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Build.Job.Status() != build.Canceled || !rec.Build.HasState {
		t.Fatalf("UpdateBuild returned %+v", rec.Build.Job)
	}
	check := func(what string, got build.Build) {
		t.Helper()
		j := got.Job
		if !bytes.Equal(got.State, big) || !got.HasState || !got.StateCapturedOnCancel || j.WorkerID != "worker-1" || j.Error != "interrupted" ||
			!j.StartedAt.Equal(*ts(1_000_001)) || !j.HeartbeatAt.Equal(*ts(2_000_002)) || !j.CanceledAt.Equal(*ts(3_000_003)) ||
			!j.CompletedAt.Equal(*ts(4_000_004)) || !j.CreatedAt.Equal(t0) || j.BuildID != b.ID || got.Number != 1 ||
			got.Transition != build.Start || got.TemplateVersionID != f.Version.ID || got.StateSource != build.SourceNone || !got.CreatedAt.Equal(t0) {
			t.Fatalf("%s: build read back differs (state %d bytes, job %+v)", what, len(got.State), j)
		}
	}
	byJob, err := s.BuildByJob(ctx, b.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	check("BuildByJob", byJob)
	byNumber, err := s.BuildByNumber(ctx, w.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	check("BuildByNumber", byNumber)
	gotW, err := s.Workspace(ctx, f.Ref("tf"))
	if err != nil || gotW.ActualState != workspace.Failed || !gotW.ActualStateUpdatedAt.Equal(*actualAt) || gotW.ErrorType != build.ErrorType ||
		gotW.ErrorMessage != "build #1 (start) was canceled: interrupted" {
		t.Fatalf("workspace after UpdateBuild: %+v, %v", gotW, err)
	}

	// The state back to none, the job columns back to NULL.
	if _, err := s.UpdateBuild(ctx, b.Job.ID, func(rec store.BuildRecord) (store.BuildRecord, error) {
		rec.Build.State, rec.Build.StateCapturedOnCancel = nil, false
		rec.Build.Job = build.Job{ID: rec.Build.Job.ID, BuildID: rec.Build.ID, CreatedAt: rec.Build.Job.CreatedAt}
		return rec, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.BuildByJob(ctx, b.Job.ID); err != nil || got.State != nil || got.HasState || got.StateCapturedOnCancel ||
		got.Job.Status() != build.Pending || got.Job.WorkerID != "" || got.Job.HeartbeatAt != nil {
		t.Fatalf("after clearing: %+v, %v", got.Job, err)
	}

	// fn's error writes nothing.
	refused := errors.New("refused")
	if _, err := s.UpdateBuild(ctx, b.Job.ID, func(rec store.BuildRecord) (store.BuildRecord, error) {
		rec.Build.State = []byte("x")
		rec.Build.Job.CompletedAt = ts(1)
		rec.Workspace.ActualState = workspace.Running
		return rec, refused
	}); !errors.Is(err, refused) {
		t.Fatalf("UpdateBuild with fn error: %v", err)
	}
	if got, _ := s.BuildByJob(ctx, b.Job.ID); got.State != nil || got.Job.CompletedAt != nil {
		t.Fatalf("a refused UpdateBuild wrote the build")
	}
	if got, _ := s.Workspace(ctx, f.Ref("tf")); got.ActualState != workspace.Failed {
		t.Fatalf("a refused UpdateBuild wrote the workspace: %s", got.ActualState)
	}
	if _, err := s.UpdateBuild(ctx, uuid.NewString(), func(rec store.BuildRecord) (store.BuildRecord, error) { return rec, nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("UpdateBuild of an unknown job: %v, want ErrNotFound", err)
	}
	if _, err := s.BuildByJob(ctx, uuid.NewString()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("BuildByJob of an unknown job: %v, want ErrNotFound", err)
	}
}

func testAcquireJobOrder(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "ao")
	if _, ok, err := s.AcquireJob(ctx, "w", t0); ok || err != nil {
		t.Fatalf("AcquireJob with no job = %v, %v", ok, err)
	}
	// Created out of order: the oldest is claimed first.
	_, second := f.Create(t, s, "second", t0.Add(2*time.Second))
	_, canceled := f.Create(t, s, "canceled", t0)
	_, reaped := f.Create(t, s, "reaped", t0.Add(time.Second))
	_, third := f.Create(t, s, "third", t0.Add(3*time.Second))
	// A pending job canceled, and one failed by a reaper (completed, never started): never claimed.
	if _, err := s.UpdateBuild(ctx, canceled.Job.ID, func(rec store.BuildRecord) (store.BuildRecord, error) {
		b, err := build.Cancel(*rec.Build, "alice", t0.Add(time.Minute))
		rec.Build = &b
		return rec, err
	}); err != nil {
		t.Fatal(err)
	}
	if b, _ := s.BuildByJob(ctx, canceled.Job.ID); b.Job.Status() != build.Canceled {
		t.Fatalf("canceled pending job is %s", b.Job.Status())
	}
	finish(t, s, reaped.Job.ID, build.Outcome{Error: "no provisioner picked it up"}, t0.Add(time.Minute))

	now := t0.Add(time.Hour)
	got := acquire(t, s, "w1", now)
	if got.Job.ID != second.Job.ID || got.Job.WorkerID != "w1" || !got.Job.StartedAt.Equal(now) || !got.Job.HeartbeatAt.Equal(now) ||
		got.Job.Status() != build.Running || got.ID != second.ID || got.InitiatorName != f.User.Username || got.TemplateVersionID != f.Version.ID {
		t.Fatalf("first claim: %+v", got)
	}
	if stored, _ := s.BuildByJob(ctx, second.Job.ID); stored.Job.WorkerID != "w1" || !stored.Job.StartedAt.Equal(now) {
		t.Fatalf("claim not stored: %+v", stored.Job)
	}
	if got := acquire(t, s, "w2", now); got.Job.ID != third.Job.ID {
		t.Fatalf("second claim: job of build %s, want third", got.ID)
	}
	if _, ok, err := s.AcquireJob(ctx, "w3", now); ok || err != nil {
		t.Fatalf("AcquireJob with none pending = %v, %v", ok, err)
	}
	if _, _, err := s.AcquireJob(ctx, "", now); err == nil {
		t.Fatal("AcquireJob without a worker id succeeded")
	}
}

// testAcquireJobConcurrent: 8 provisioners claiming at once over 50 jobs claim each exactly once.
func testAcquireJobConcurrent(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "ac")
	const jobs, workers = 50, 8
	want := map[string]bool{}
	for i := range jobs {
		_, b := f.Create(t, s, fmt.Sprintf("w%02d", i), t0.Add(time.Duration(i%7)*time.Second))
		want[b.Job.ID] = true
	}
	var mu sync.Mutex
	claims := map[string][]string{} // job -> workers
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker := fmt.Sprintf("worker-%d", w)
			for {
				b, ok, err := s.AcquireJob(ctx, worker, t0.Add(time.Hour))
				if err != nil {
					errs <- err
					return
				}
				if !ok {
					return
				}
				if b.Job.WorkerID != worker {
					errs <- fmt.Errorf("%s got job %s owned by %s", worker, b.Job.ID, b.Job.WorkerID)
					return
				}
				mu.Lock()
				claims[b.Job.ID] = append(claims[b.Job.ID], worker)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for id, by := range claims {
		if len(by) != 1 {
			t.Errorf("job %s claimed %d times (%v)", id, len(by), by)
		}
		if !want[id] {
			t.Errorf("unknown job %s claimed", id)
		}
	}
	if len(claims) != jobs {
		t.Errorf("%d jobs claimed, want %d", len(claims), jobs)
	}
	counts, err := s.CountJobs(ctx)
	if err != nil || counts[build.Running] != jobs || counts[build.Pending] != 0 {
		t.Fatalf("CountJobs = %v, %v", counts, err)
	}
}

func testHeartbeat(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "hb")
	_, b := f.Create(t, s, "tf", t0)
	if _, err := s.Heartbeat(ctx, b.Job.ID, "w1", t0); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("heartbeat of a pending job: %v, want ErrNotOwner", err)
	}
	if _, err := s.Heartbeat(ctx, b.Job.ID, "", t0); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("heartbeat of a pending job without worker id: %v, want ErrNotOwner", err)
	}
	acquire(t, s, "w1", t0.Add(time.Second))
	if _, err := s.Heartbeat(ctx, b.Job.ID, "w2", t0.Add(2*time.Second)); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("heartbeat by another worker: %v, want ErrNotOwner", err)
	}
	at := t0.Add(5 * time.Second)
	j, err := s.Heartbeat(ctx, b.Job.ID, "w1", at)
	if err != nil || !j.HeartbeatAt.Equal(at) || j.CanceledAt != nil || j.Status() != build.Running || j.ID != b.Job.ID {
		t.Fatalf("Heartbeat = %+v, %v", j, err)
	}
	if got, _ := s.BuildByJob(ctx, b.Job.ID); !got.Job.HeartbeatAt.Equal(at) {
		t.Fatalf("heartbeat not stored: %v", got.Job.HeartbeatAt)
	}
	// A cancel reaches the worker through its heartbeat.
	if _, err := s.UpdateBuild(ctx, b.Job.ID, func(rec store.BuildRecord) (store.BuildRecord, error) {
		nb, err := build.Cancel(*rec.Build, "alice", t0.Add(6*time.Second))
		rec.Build = &nb
		return rec, err
	}); err != nil {
		t.Fatal(err)
	}
	j, err = s.Heartbeat(ctx, b.Job.ID, "w1", t0.Add(7*time.Second))
	if err != nil || j.CanceledAt == nil || j.Status() != build.Canceling {
		t.Fatalf("Heartbeat of a canceling job = %+v, %v", j, err)
	}
	finish(t, s, b.Job.ID, build.Outcome{Canceled: true}, t0.Add(8*time.Second))
	if _, err := s.Heartbeat(ctx, b.Job.ID, "w1", t0.Add(9*time.Second)); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("heartbeat after the end: %v, want ErrNotOwner", err)
	}
	if got, _ := s.BuildByJob(ctx, b.Job.ID); !got.Job.HeartbeatAt.Equal(t0.Add(7 * time.Second)) {
		t.Fatalf("a refused heartbeat was stored: %v", got.Job.HeartbeatAt)
	}
	if _, err := s.Heartbeat(ctx, uuid.NewString(), "w1", t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("heartbeat of an unknown job: %v, want ErrNotFound", err)
	}
}

func logLines(from, n int, at time.Time) []store.LogLine {
	out := make([]store.LogLine, n)
	for i := range out {
		out[i] = store.LogLine{CreatedAt: at.Add(time.Duration(from+i) * time.Millisecond), Stage: "apply", Level: "info", Output: fmt.Sprintf("line %d", from+i)}
	}
	return out
}

func testLogs(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "lg")
	_, b := f.Create(t, s, "tf", t0)
	_, other := f.Create(t, s, "other", t0)
	if err := s.AppendLogs(ctx, b.Job.ID, logLines(0, 3, t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendLogs(ctx, other.Job.ID, logLines(100, 2, t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendLogs(ctx, b.Job.ID, []store.LogLine{{CreatedAt: t0.Add(time.Second), Stage: "plan", Level: "warn", Output: "line 3 ünïcode\ttab"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendLogs(ctx, b.Job.ID, logLines(4, 1, t0)); err != nil {
		t.Fatal(err)
	}
	all, err := s.JobLogs(ctx, b.Job.ID, 0, 0)
	if err != nil || len(all) != 5 {
		t.Fatalf("JobLogs = %d lines, %v; want 5", len(all), err)
	}
	for i, l := range all {
		if i > 0 && l.ID <= all[i-1].ID {
			t.Fatalf("line ids not increasing: %d after %d", l.ID, all[i-1].ID)
		}
		if l.JobID != b.Job.ID {
			t.Fatalf("line %d of job %s", i, l.JobID)
		}
	}
	if all[0].Output != "line 0" || !all[0].CreatedAt.Equal(t0) || all[0].Stage != "apply" || all[0].Level != "info" ||
		all[3].Output != "line 3 ünïcode\ttab" || all[3].Level != "warn" || all[3].Stage != "plan" || all[4].Output != "line 4" {
		t.Fatalf("lines: %+v", all)
	}
	page, err := s.JobLogs(ctx, b.Job.ID, all[1].ID, 2)
	if err != nil || len(page) != 2 || page[0].ID != all[2].ID || page[1].ID != all[3].ID {
		t.Fatalf("JobLogs(after line 1, limit 2) = %+v, %v", page, err)
	}
	if rest, err := s.JobLogs(ctx, b.Job.ID, all[4].ID, 100); err != nil || len(rest) != 0 {
		t.Fatalf("JobLogs after the last line = %+v, %v", rest, err)
	}
	if none, err := s.JobLogs(ctx, uuid.NewString(), 0, 10); err != nil || len(none) != 0 {
		t.Fatalf("JobLogs of an unknown job = %+v, %v", none, err)
	}
	if err := s.AppendLogs(ctx, uuid.NewString(), logLines(0, 1, t0)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("AppendLogs to an unknown job: %v, want ErrNotFound", err)
	}

	// The cap: lines beyond MaxLogLinesPerJob are dropped without error.
	if err := s.AppendLogs(ctx, b.Job.ID, logLines(5, store.MaxLogLinesPerJob, t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendLogs(ctx, b.Job.ID, logLines(store.MaxLogLinesPerJob+5, 10, t0)); err != nil {
		t.Fatalf("AppendLogs to a full log: %v, want lines dropped silently", err)
	}
	all, err = s.JobLogs(ctx, b.Job.ID, 0, 0)
	if err != nil || len(all) != store.MaxLogLinesPerJob {
		t.Fatalf("JobLogs = %d lines, %v; want the cap, %d", len(all), err, store.MaxLogLinesPerJob)
	}
	if last := all[len(all)-1].Output; last != fmt.Sprintf("line %d", store.MaxLogLinesPerJob-1) {
		t.Fatalf("last line kept %q, want the cap's last", last)
	}
	if o, _ := s.JobLogs(ctx, other.Job.ID, 0, 0); len(o) != 2 {
		t.Fatalf("the other job has %d lines, want 2", len(o))
	}
}

func testStaleJobs(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "st")
	cut := t0.Add(5 * time.Minute)
	old, recent := t0, t0.Add(10*time.Minute)
	mk := func(name string, created time.Time, set func(j *build.Job)) string {
		_, b := f.Create(t, s, name, created)
		if set != nil {
			setJob(t, s, b.Job.ID, set)
		}
		return b.Job.ID
	}
	pendingOld := mk("pending-old", old, nil)
	mk("pending-new", recent, nil)
	runningOld := mk("running-old", old, func(j *build.Job) { j.WorkerID, j.StartedAt, j.HeartbeatAt = "w", &old, &old })
	mk("running-new", old, func(j *build.Job) { j.WorkerID, j.StartedAt, j.HeartbeatAt = "w", &old, &recent })
	cancelingOld := mk("canceling-old", old, func(j *build.Job) { j.WorkerID, j.StartedAt, j.HeartbeatAt, j.CanceledAt = "w", &old, &old, &recent })
	mk("done-old", old, func(j *build.Job) { j.WorkerID, j.StartedAt, j.HeartbeatAt, j.CompletedAt = "w", &old, &old, &old })
	mk("canceled-pending-old", old, func(j *build.Job) { j.CanceledAt, j.CompletedAt = &old, &old })
	mk("heartbeat-at-cut", old, func(j *build.Job) { j.WorkerID, j.StartedAt, j.HeartbeatAt = "w", &old, &cut })

	got, err := s.StaleJobs(ctx, cut, cut)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{pendingOld, runningOld, cancelingOld}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("StaleJobs = %v, want %v (pending-old, running-old, canceling-old)", got, want)
	}
	// Pending jobs have their own limit.
	if got, _ := s.StaleJobs(ctx, cut, old); len(got) != 2 {
		t.Fatalf("StaleJobs with no pending limit = %v, want running-old and canceling-old", got)
	}
}

func testActiveJobsOf(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "aj")
	at := t0.Add(time.Minute)
	mk := func(name string, set func(j *build.Job)) string {
		_, b := f.Create(t, s, name, t0)
		if set != nil {
			setJob(t, s, b.Job.ID, set)
		}
		return b.Job.ID
	}
	mk("pending", nil)
	running := mk("running", func(j *build.Job) { j.WorkerID, j.StartedAt = "w1", &at })
	canceling := mk("canceling", func(j *build.Job) { j.WorkerID, j.StartedAt, j.CanceledAt = "w1", &at, &at })
	mk("other-worker", func(j *build.Job) { j.WorkerID, j.StartedAt = "w2", &at })
	mk("done", func(j *build.Job) { j.WorkerID, j.StartedAt, j.CompletedAt = "w1", &at, &at })
	got, err := s.ActiveJobsOf(ctx, "w1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{running, canceling}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("active jobs of w1: %v, want %v", got, want)
	}
	if got, err := s.ActiveJobsOf(ctx, "nobody"); err != nil || len(got) != 0 {
		t.Fatalf("active jobs of nobody: %v %v", got, err)
	}
}

func testCountJobs(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "cj")
	at := t0.Add(time.Minute)
	sets := map[build.JobStatus]func(j *build.Job){
		build.Pending:   func(j *build.Job) {},
		build.Running:   func(j *build.Job) { j.WorkerID, j.StartedAt = "w", &at },
		build.Succeeded: func(j *build.Job) { j.WorkerID, j.StartedAt, j.CompletedAt = "w", &at, &at },
		build.Failed:    func(j *build.Job) { j.WorkerID, j.StartedAt, j.CompletedAt, j.Error = "w", &at, &at, "boom" },
		build.Canceling: func(j *build.Job) { j.WorkerID, j.StartedAt, j.CanceledAt = "w", &at, &at },
		build.Canceled:  func(j *build.Job) { j.CanceledAt, j.CompletedAt, j.Error = &at, &at, "canceled" },
	}
	want := map[build.JobStatus]int{}
	i := 0
	for st, set := range sets {
		for range 1 + i {
			_, b := f.Create(t, s, fmt.Sprintf("%s-%d", st, want[st]), t0)
			if got := setJob(t, s, b.Job.ID, set); got.Job.Status() != st {
				t.Fatalf("fixture: job is %s, want %s", got.Job.Status(), st)
			}
			want[st]++
		}
		i++
	}
	got, err := s.CountJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for st, n := range want {
		if got[st] != n {
			t.Errorf("CountJobs[%s] = %d, want %d (all: %v)", st, got[st], n, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("CountJobs = %v, want the six statuses", got)
	}
}

func testPutBuildState(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "ps")
	w, b := f.Create(t, s, "tf", t0)
	pushed := []byte(`{"version":4,"serial":7}`)
	if err := s.PutBuildState(ctx, w.ID, pushed, nil); !errors.Is(err, build.ErrBuildActive) {
		t.Fatalf("PutBuildState while pending: %v, want ErrBuildActive", err)
	}
	acquire(t, s, "w1", t0.Add(time.Second))
	if err := s.PutBuildState(ctx, w.ID, pushed, nil); !errors.Is(err, build.ErrBuildActive) {
		t.Fatalf("PutBuildState while running: %v, want ErrBuildActive", err)
	}
	if got, _ := s.BuildByJob(ctx, b.Job.ID); got.State != nil {
		t.Fatal("a refused PutBuildState wrote the state")
	}
	finish(t, s, b.Job.ID, build.Outcome{Canceled: true, State: []byte("partial")}, t0.Add(2*time.Second))
	if got, _ := s.BuildByJob(ctx, b.Job.ID); !got.StateCapturedOnCancel {
		t.Fatal("fixture: state not captured on cancel")
	}
	// The check sees the current state in the transaction; its error is returned and nothing is
	// written.
	refused := errors.New("refused")
	var seen []byte
	if err := s.PutBuildState(ctx, w.ID, pushed, func(cur []byte) error { seen = cur; return refused }); !errors.Is(err, refused) {
		t.Fatalf("PutBuildState with a refusing check: %v", err)
	}
	if got, _ := s.BuildByJob(ctx, b.Job.ID); string(seen) != "partial" || string(got.State) != "partial" {
		t.Fatalf("the check saw %q; the state after its refusal is %q", seen, got.State)
	}
	if err := s.PutBuildState(ctx, w.ID, pushed, func([]byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	got, err := s.BuildByNumber(ctx, w.ID, 0)
	if err != nil || !bytes.Equal(got.State, pushed) || got.StateCapturedOnCancel || got.Job.Status() != build.Canceled {
		t.Fatalf("after PutBuildState: captured %v, status %s, %v", got.StateCapturedOnCancel, got.Job.Status(), err)
	}
	if err := s.PutBuildState(ctx, uuid.NewString(), pushed, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("PutBuildState of an unknown workspace: %v, want ErrNotFound", err)
	}
}

func testProvisioners(t *testing.T, s store.Store) {
	ctx := context.Background()
	p := store.Provisioner{ID: uuid.NewString(), Name: "p1", TokenHash: []byte("hash-p1"), CreatedAt: t0}
	if err := s.CreateProvisioner(ctx, p); err != nil {
		t.Fatal(err)
	}
	dup := p
	dup.ID, dup.TokenHash = uuid.NewString(), []byte("hash-p2")
	if err := s.CreateProvisioner(ctx, dup); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate name: %v, want ErrConflict", err)
	}
	got, err := s.ProvisionerByTokenHash(ctx, []byte("hash-p1"))
	if err != nil || got.ID != p.ID || got.Name != "p1" || got.LastSeenAt != nil || !got.CreatedAt.Equal(t0) {
		t.Fatalf("ProvisionerByTokenHash = %+v, %v", got, err)
	}
	if _, err := s.ProvisionerByTokenHash(ctx, []byte("nope")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown token: %v, want ErrNotFound", err)
	}
	seen := t0.Add(time.Minute)
	if err := s.TouchProvisioner(ctx, p.ID, seen); err != nil {
		t.Fatal(err)
	}
	if err := s.TouchProvisioner(ctx, uuid.NewString(), seen); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("TouchProvisioner(unknown): %v, want ErrNotFound", err)
	}
	list, err := s.ListProvisioners(ctx)
	if err != nil || len(list) != 1 || list[0].LastSeenAt == nil || !list[0].LastSeenAt.Equal(seen) {
		t.Fatalf("ListProvisioners = %+v, %v", list, err)
	}
}

// testJobNotifications: a queued or canceled job wakes SubscribeJobs; log lines, a claim, a
// heartbeat, a cancel and the end wake the job's subscribers; nothing else wakes them.
func testJobNotifications(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "jn")
	jobs, cancelJobs := s.SubscribeJobs()
	defer cancelJobs()
	agentCh, cancelAgent := s.SubscribeAgent(f.Agent.ID)
	defer cancelAgent()
	settle := Settler(t, s)

	_, b := f.Create(t, s, "tf", t0)
	if !Woken(jobs) {
		t.Fatal("a queued job (CreateBuildWorkspace) did not wake SubscribeJobs")
	}
	if settle(); !Quiet(agentCh) {
		t.Fatal("a terraform workspace woke an agent's subscriber")
	}
	job, cancelJob := s.SubscribeJob(b.Job.ID)
	defer cancelJob()
	_, other := f.Create(t, s, "other", t0.Add(time.Second)) // younger: b is claimed first
	if !Woken(jobs) {
		t.Fatal("a second queued job did not wake SubscribeJobs")
	}
	if settle(); !Quiet(job) {
		t.Fatal("another job's creation woke the job's subscriber")
	}

	acquire(t, s, "w1", t0.Add(time.Second))
	if !Woken(job) {
		t.Fatal("the claim did not wake the job's subscriber")
	}
	if settle(); !Quiet(jobs) {
		t.Fatal("a claim woke SubscribeJobs")
	}
	if err := s.AppendLogs(ctx, b.Job.ID, logLines(0, 2, t0)); err != nil {
		t.Fatal(err)
	}
	if !Woken(job) {
		t.Fatal("log lines did not wake the job's subscriber")
	}
	if err := s.AppendLogs(ctx, other.Job.ID, logLines(0, 2, t0)); err != nil {
		t.Fatal(err)
	}
	if settle(); !Quiet(job) {
		t.Fatal("another job's log lines woke the job's subscriber")
	}
	if _, err := s.Heartbeat(ctx, b.Job.ID, "w1", t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if !Woken(job) {
		t.Fatal("a heartbeat did not wake the job's subscriber")
	}
	// A refused heartbeat or NewBuild wakes nobody.
	if _, err := s.Heartbeat(ctx, b.Job.ID, "w2", t0.Add(2*time.Second)); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("heartbeat by another worker: %v", err)
	}
	refused := errors.New("refused")
	if _, _, err := s.NewBuild(ctx, f.Ref("tf"), func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
		nb := f.Build(rec.Workspace, 2, build.Stop, t0)
		return rec.Workspace, &nb, refused
	}); !errors.Is(err, refused) {
		t.Fatal(err)
	}
	if settle(); !Quiet(job) || !Quiet(jobs) {
		t.Fatal("a refused heartbeat or build woke a subscriber")
	}

	// A cancel wakes both: the job's runner learns of it, and provisioners look again.
	if _, err := s.UpdateBuild(ctx, b.Job.ID, func(rec store.BuildRecord) (store.BuildRecord, error) {
		nb, err := build.Cancel(*rec.Build, "alice", t0.Add(3*time.Second))
		rec.Build = &nb
		return rec, err
	}); err != nil {
		t.Fatal(err)
	}
	if !Woken(job) || !Woken(jobs) {
		t.Fatal("a cancel did not wake the job's subscriber and SubscribeJobs")
	}
	finish(t, s, b.Job.ID, build.Outcome{Canceled: true}, t0.Add(4*time.Second))
	if !Woken(job) {
		t.Fatal("the end did not wake the job's subscriber")
	}
	if settle(); !Quiet(jobs) {
		t.Fatal("the end of a job woke SubscribeJobs")
	}
	// A new build's job is announced.
	if _, _, err := s.NewBuild(ctx, f.Ref("tf"), func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
		nb := f.Build(rec.Workspace, rec.Build.Number+1, build.Start, t0.Add(time.Minute))
		return rec.Workspace, &nb, nil
	}); err != nil {
		t.Fatal(err)
	}
	if !Woken(jobs) {
		t.Fatal("a NewBuild did not wake SubscribeJobs")
	}
	if settle(); !Quiet(job) || !Quiet(agentCh) {
		t.Fatal("a new build woke the previous job's or an agent's subscriber")
	}

	// After cancel, nothing arrives.
	cancelJobs()
	cancelJob()
	f.Create(t, s, "third", t0)
	if err := s.AppendLogs(ctx, b.Job.ID, logLines(9, 1, t0)); err != nil {
		t.Fatal(err)
	}
	if settle(); !Quiet(jobs) || !Quiet(job) {
		t.Fatal("a cancelled subscription was woken")
	}
}

// testStateRetention: only the store.KeptBuildStates latest builds of a workspace keep their state;
// older ones lose it (marked StatePruned) when a newer build is created. Each new build still starts
// from the latest build's state (the seed's state source), and other workspaces are untouched.
func testStateRetention(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "sr")
	stateOf := func(n int) []byte { return fmt.Appendf(nil, `{"version":4,"serial":%d}`, n) }
	other, ob := f.Create(t, s, "other", t0)
	acquire(t, s, "w1", t0)
	finish(t, s, ob.Job.ID, build.Outcome{State: []byte(`{"other":1}`)}, t0)

	w, b := f.Create(t, s, "tf", t0.Add(time.Second))
	at := t0.Add(time.Minute)
	acquire(t, s, "w1", at)
	finish(t, s, b.Job.ID, build.Outcome{State: stateOf(1)}, at)
	total := store.KeptBuildStates + 3
	for n := 2; n <= total; n++ {
		at = at.Add(time.Minute)
		_, nb, err := s.NewBuild(ctx, store.WorkspaceRef{ID: w.ID}, func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
			b := f.Build(rec.Workspace, n, build.Start, at)
			b.State, b.StateSource = build.InitialState(false, nil, rec.Build)
			return rec.Workspace, &b, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(nb.State, stateOf(n-1)) || nb.StateSource != build.SourcePrevious {
			t.Fatalf("build #%d starts from %s (%s), want the latest build's state %s", n, nb.State, nb.StateSource, stateOf(n-1))
		}
		acquire(t, s, "w1", at)
		o := build.Outcome{State: stateOf(n)}
		if n == total {
			o = build.Outcome{Error: "failed before Terraform wrote a state"} // keeps its input state
		}
		finish(t, s, nb.Job.ID, o, at)
	}
	list, err := s.ListBuilds(ctx, w.ID)
	if err != nil || len(list) != total {
		t.Fatalf("ListBuilds: %d builds, %v", len(list), err)
	}
	for _, lb := range list {
		got, err := s.BuildByNumber(ctx, w.ID, lb.Number)
		if err != nil {
			t.Fatal(err)
		}
		want := stateOf(lb.Number)
		if lb.Number == total {
			want = stateOf(total - 1)
		}
		if kept := lb.Number > total-store.KeptBuildStates; kept {
			if !bytes.Equal(got.State, want) || got.StatePruned || !lb.HasState || lb.StatePruned {
				t.Errorf("build #%d: state %s pruned %v (listed: has %v pruned %v), want %s kept", lb.Number, got.State, got.StatePruned, lb.HasState, lb.StatePruned, want)
			}
		} else if got.State != nil || !got.StatePruned || lb.HasState || !lb.StatePruned {
			t.Errorf("build #%d: state %s pruned %v (listed: has %v pruned %v), want it pruned", lb.Number, got.State, got.StatePruned, lb.HasState, lb.StatePruned)
		}
	}
	if got, err := s.BuildByNumber(ctx, other.ID, 1); err != nil || string(got.State) != `{"other":1}` || got.StatePruned {
		t.Errorf("another workspace's build: %s pruned %v, %v", got.State, got.StatePruned, err)
	}
}
