package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/parameter"
	"github.com/hangar-dev/hangar/internal/prebuild"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

var presetTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"Presets", testPresets},
	{"PresetLease", testPresetLease},
	{"PrebuildsUser", testPrebuildsUser},
	{"PrebuildInstances", testPrebuildInstances},
	{"ClaimPrebuildConcurrent", testClaimConcurrent},
}

func (f BuildFixture) preset(t testing.TB, s store.Store, name string, instances int) store.Preset {
	t.Helper()
	p, err := s.PutPreset(context.Background(), store.Preset{ID: uuid.NewString(), TemplateID: f.Template.ID, Name: name,
		Parameters: map[string]string{"region": "eu"}, Pool: prebuild.Pool{Instances: instances}, CreatedBy: "admin", CreatedAt: t0, UpdatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// prebuilt inserts a prebuilt workspace of the preset, its create ended as o (nil: pending).
func (f BuildFixture) prebuilt(t testing.TB, s store.Store, p store.Preset, name string, at time.Time, o *build.Outcome) workspace.Workspace {
	t.Helper()
	w := f.TerraformWorkspace(name)
	w.OwnerID, w.OwnerName, w.PresetID, w.CreatedAt = store.PrebuildsUserID, store.PrebuildsUsername, p.ID, at
	for k, v := range p.Parameters {
		w.Parameters = append(w.Parameters, workspace.ParameterValue{Name: k, Value: v})
	}
	b := f.Build(w, 1, build.Start, at)
	b.InitiatorID, b.Reason, b.IsPrebuild = store.PrebuildsUserID, build.ReasonPrebuild, true
	if err := s.CreateBuildWorkspace(context.Background(), w, b); err != nil {
		t.Fatal(err)
	}
	if o != nil {
		acquire(t, s, "w-"+name, at)
		finish(t, s, b.Job.ID, *o, at)
	}
	return w
}

// testPresets: a preset round-trips, is replaced by name, hidden once deleted (and back when put
// again), and its row is purged only once deleted and without unclaimed instances.
func testPresets(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "ps")
	in := store.Preset{ID: uuid.NewString(), TemplateID: f.Template.ID, Name: "small", VersionID: f.Version.ID,
		Parameters: map[string]string{"region": "eu"}, CreatedBy: "admin", CreatedAt: t0, UpdatedAt: t0,
		Pool: prebuild.Pool{Instances: 2, Schedule: []prebuild.ScheduleRule{{Cron: "* 8-18 * * 1-5", Instances: 5}}, Timezone: "Europe/Paris"}}
	p, err := s.PutPreset(ctx, in)
	if err != nil || p.ID != in.ID || p.TemplateName != f.Template.Name || p.VersionNumber != 1 || p.Parameters["region"] != "eu" ||
		p.Pool.Instances != 2 || len(p.Pool.Schedule) != 1 || p.Pool.Schedule[0] != in.Pool.Schedule[0] || p.Pool.Timezone != "Europe/Paris" ||
		!p.CreatedAt.Equal(t0) || p.DeletedAt != nil || p.ReconciledAt != nil {
		t.Fatalf("PutPreset = %+v, %v", p, err)
	}
	again := store.Preset{ID: uuid.NewString(), TemplateID: f.Template.ID, Name: "small", Pool: prebuild.Pool{Instances: 1},
		CreatedAt: t0.Add(time.Hour), UpdatedAt: t0.Add(time.Hour)}
	if p, err = s.PutPreset(ctx, again); err != nil || p.ID != in.ID || p.VersionID != "" || p.Parameters != nil || p.Pool.Instances != 1 ||
		p.Pool.Schedule != nil || !p.CreatedAt.Equal(t0) || !p.UpdatedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("replaced: %+v, %v", p, err)
	}
	if ps, err := s.ListPresets(ctx, f.Template.ID, false); err != nil || len(ps) != 1 || ps[0].ID != in.ID {
		t.Fatalf("ListPresets = %+v, %v", ps, err)
	}
	w := f.prebuilt(t, s, p, "pb1", t0, &build.Outcome{State: []byte(`{}`)})
	if err := s.DeletePreset(ctx, f.Template.ID, "small", t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePreset(ctx, f.Template.ID, "small", t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a second delete: %v", err)
	}
	if _, err := s.PresetByName(ctx, f.Template.ID, "small"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("PresetByName of a deleted preset: %v", err)
	}
	if ps, err := s.ListPresets(ctx, "", false); err != nil || len(ps) != 0 {
		t.Fatalf("ListPresets leaves deleted ones out: %+v, %v", ps, err)
	}
	ps, err := s.ListPresets(ctx, "", true)
	if err != nil || len(ps) != 1 || ps[0].DeletedAt == nil || !ps[0].DeletedAt.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("ListPresets with deleted ones: %+v, %v", ps, err)
	}
	if ok, err := s.PurgePreset(ctx, p.ID); err != nil || ok {
		t.Fatalf("purged with an instance left: %v, %v", ok, err)
	}
	// Its instance terminated (an orphan delete), the row goes.
	if _, _, err := s.NewBuild(ctx, store.WorkspaceRef{ID: w.ID}, func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
		b := f.Build(rec.Workspace, 2, build.Delete, t0)
		b.Orphan, b.Job.StartedAt, b.Job.CompletedAt = true, &t0, &t0
		return afterBuild(rec.Workspace, b, t0), &b, nil
	}); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.PurgePreset(ctx, p.ID); err != nil || !ok {
		t.Fatalf("PurgePreset = %v, %v; want purged", ok, err)
	}
	// A live preset is never purged; a deleted one put again comes back.
	p2 := f.preset(t, s, "other", 1)
	if ok, err := s.PurgePreset(ctx, p2.ID); err != nil || ok {
		t.Fatalf("a live preset purged: %v, %v", ok, err)
	}
	if err := s.DeletePreset(ctx, f.Template.ID, "other", t0); err != nil {
		t.Fatal(err)
	}
	if back := f.preset(t, s, "other", 3); back.ID != p2.ID || back.DeletedAt != nil || back.Pool.Instances != 3 {
		t.Fatalf("put again: %+v", back)
	}
}

// testPresetLease: one owner holds a preset's lease at a time, until it releases it or the lease
// ends.
func testPresetLease(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "pl")
	p := f.preset(t, s, "p", 1)
	lease := func(owner string, now time.Time) bool {
		ok, err := s.LeasePreset(ctx, p.ID, owner, now, now.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !lease("a", t0) || lease("b", t0) || !lease("a", t0.Add(time.Second)) {
		t.Fatal("a takes the lease, b does not, a renews it")
	}
	if lease("b", t0.Add(time.Minute)) || !lease("b", t0.Add(time.Minute+time.Second)) {
		t.Fatal("b takes it only once a's has ended")
	}
	if err := s.ReleasePreset(ctx, p.ID, "a", t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if lease("a", t0.Add(time.Minute+2*time.Second)) {
		t.Fatal("a released a lease it no longer held")
	}
	if err := s.ReleasePreset(ctx, p.ID, "b", t0.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if !lease("a", t0.Add(time.Minute+3*time.Second)) {
		t.Fatal("released, the lease is free")
	}
	if got, err := s.PresetByName(ctx, f.Template.ID, "p"); err != nil || got.ReconciledAt == nil || !got.ReconciledAt.Equal(t0.Add(3*time.Minute)) {
		t.Fatalf("reconciled at %v (%v)", got.ReconciledAt, err)
	}
}

// testPrebuildsUser: the prebuilt workspaces' system user exists, but is never found by token or
// username, and its name is taken.
func testPrebuildsUser(t *testing.T, s store.Store) {
	ctx := context.Background()
	if _, err := s.UserByUsername(ctx, store.PrebuildsUsername); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("UserByUsername(prebuilds): %v, want ErrNotFound", err)
	}
	if _, _, err := s.TokenByHash(ctx, []byte{1}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("TokenByHash(its hash): %v, want ErrNotFound", err)
	}
	if err := s.ResetUserTokens(ctx, store.PrebuildsUserID, store.APIToken{ID: uuid.NewString(), Name: "x", Hash: []byte("h"), CreatedAt: t0}, t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ResetUserTokens(prebuilds): %v, want ErrNotFound", err)
	}
	if n, err := s.CountUsers(ctx); err != nil || n != 0 {
		t.Fatalf("CountUsers = %d, %v", n, err)
	}
	if err := s.CreateUser(ctx, workspace.User{ID: uuid.NewString(), Username: store.PrebuildsUsername, TokenHash: []byte("x"), CreatedAt: t0}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a person named %s: %v, want ErrConflict", store.PrebuildsUsername, err)
	}
}

// testPrebuildInstances: the unclaimed prebuilt workspaces of a preset with their latest builds,
// left out of ListWorkspaces unless asked; the failures since the last successful create; a claim
// takes the oldest ready one on the version, refuses a name in use, and finds none when none is
// ready.
func testPrebuildInstances(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "pi")
	p := f.preset(t, s, "p", 3)
	ok := &build.Outcome{State: []byte(`{"serial":1}`)}
	failed := &build.Outcome{Error: "boom"}
	ready := f.prebuilt(t, s, p, "ready", t0, ok)
	f.prebuilt(t, s, p, "failed1", t0.Add(time.Minute), failed)
	f.prebuilt(t, s, p, "failed2", t0.Add(2*time.Minute), failed)
	newer := f.prebuilt(t, s, p, "newer", t0.Add(3*time.Minute), ok)
	pending := f.prebuilt(t, s, p, "pending", t0.Add(4*time.Minute), nil) // last: prebuilt acquires the oldest pending job
	if got := f.preset(t, s, "q", 1); got.ID == p.ID {
		t.Fatal("two presets share an id")
	}
	in, err := s.PrebuildInstances(ctx, p.ID)
	if err != nil || len(in) != 5 {
		t.Fatalf("PrebuildInstances = %d, %v", len(in), err)
	}
	if in[0].Workspace.ID != ready.ID || in[0].Build == nil || in[0].Build.Number != 1 || !in[0].Build.IsPrebuild ||
		in[0].Build.Job.Status() != build.Succeeded || parameter.Map(in[0].Workspace.Parameters)["region"] != "eu" || in[0].Workspace.PresetName != "p" ||
		in[4].Build.Job.Status() != build.Pending || in[1].Build.Job.Status() != build.Failed {
		t.Fatalf("instances: %+v", in)
	}
	if all, err := s.PrebuildInstances(ctx, ""); err != nil || len(all) != 5 {
		t.Fatalf("every preset's: %d, %v", len(all), err)
	}
	fails, err := s.PresetFailures(ctx, p.ID, 16)
	if err != nil || len(fails) != 0 {
		t.Fatalf("failures after the latest success: %v, %v", fails, err)
	}
	if _, err := s.UpdateBuild(ctx, in[4].Build.Job.ID, func(rec store.BuildRecord) (store.BuildRecord, error) {
		b, err := build.Cancel(*rec.Build, "test", t0.Add(4*time.Minute))
		rec.Build = &b
		return rec, err
	}); err != nil {
		t.Fatal(err)
	}
	f.prebuilt(t, s, p, "failed3", t0.Add(5*time.Minute), failed)
	f.prebuilt(t, s, p, "failed4", t0.Add(6*time.Minute), failed)
	pending = f.prebuilt(t, s, p, "pending2", t0.Add(7*time.Minute), nil)
	// A canceled create (pending's) counts neither way.
	if fails, err = s.PresetFailures(ctx, p.ID, 16); err != nil || len(fails) != 2 || !fails[0].At.Equal(t0.Add(5*time.Minute)) || !fails[1].At.Equal(t0.Add(6*time.Minute)) ||
		fails[1].Error == "" {
		t.Fatalf("failures: %v, %v", fails, err)
	}
	if ws, err := s.ListWorkspaces(ctx, store.ListFilter{}); err != nil || len(ws) != 0 {
		t.Fatalf("ListWorkspaces shows prebuilt workspaces: %d, %v", len(ws), err)
	}
	if ws, err := s.ListWorkspaces(ctx, store.ListFilter{Prebuilds: true}); err != nil || len(ws) != 8 {
		t.Fatalf("ListWorkspaces with prebuilds: %d, %v", len(ws), err)
	}

	// What the ready instance keeps moves with it: its state, and a log line of 100 bytes.
	if err := s.AppendLogs(ctx, in[0].Build.Job.ID, []store.LogLine{{CreatedAt: t0, Stage: "apply", Level: "info", Output: strings.Repeat("é", 50)}}); err != nil {
		t.Fatal(err)
	}
	var kept store.StorageUsage
	claim := func(owner workspace.User, name, version string) (workspace.Workspace, *build.Build, bool, error) {
		return s.ClaimPrebuild(ctx, p.ID, version, func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
			kept = rec.Kept
			w := rec.Workspace
			w.OwnerID, w.OwnerName, w.Name = owner.ID, owner.Username, name
			b := f.Build(w, rec.Build.Number+1, build.Start, t0.Add(time.Hour))
			b.InitiatorID, b.IsPrebuildClaim, b.State, b.StateSource = owner.ID, true, rec.Build.State, build.SourcePrevious
			return afterBuild(w, b, t0.Add(time.Hour)), &b, nil
		})
	}
	if _, _, got, err := claim(f.User, "mine", uuid.NewString()); err != nil || got {
		t.Fatalf("a claim on another version: %v, %v; want none", got, err)
	}
	taken := f.TerraformWorkspace("taken")
	if err := s.CreateBuildWorkspace(ctx, taken, f.Build(taken, 1, build.Start, t0)); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := claim(f.User, "taken", f.Version.ID); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a claim under a name in use: %v, want ErrConflict", err)
	}
	// A claim its fn refuses (too big for the claimer's storage room) writes nothing.
	tooBig := errors.New("too big")
	if _, _, _, err := s.ClaimPrebuild(ctx, p.ID, f.Version.ID, func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
		return rec.Workspace, nil, tooBig
	}); !errors.Is(err, tooBig) {
		t.Fatalf("a claim its fn refuses: %v", err)
	}
	w, b, got, err := claim(f.User, "mine", f.Version.ID)
	if want := (store.StorageUsage{StateBytes: 12, LogBytes: 100}); kept != want {
		t.Errorf("the claim saw the instance keep %+v, want %+v", kept, want)
	}
	if err != nil || !got || w.ID != ready.ID || b.Number != 2 || !b.IsPrebuildClaim || string(b.State) != `{"serial":1}` {
		t.Fatalf("claim = %+v, %+v, %v, %v; want the oldest ready one", w, b, got, err)
	}
	mine, err := s.Workspace(ctx, store.WorkspaceRef{OwnerID: f.User.ID, Name: "mine"})
	if err != nil || mine.ID != ready.ID || mine.PresetID != p.ID || mine.ActualState != workspace.Starting {
		t.Fatalf("the claimed workspace: %+v, %v", mine, err)
	}
	if w, _, got, err := claim(f.User, "second", f.Version.ID); err != nil || !got || w.ID != newer.ID {
		t.Fatalf("second claim = %+v, %v, %v", w, got, err)
	}
	if _, _, got, err := claim(f.User, "third", f.Version.ID); err != nil || got {
		t.Fatalf("a claim with none ready (%s is pending): %v, %v", pending.Name, got, err)
	}
	if in, err := s.PrebuildInstances(ctx, p.ID); err != nil || len(in) != 6 {
		t.Fatalf("instances after the claims: %d, %v", len(in), err)
	}
}

// testClaimConcurrent: claims at once never take one instance twice.
func testClaimConcurrent(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "cc")
	p := f.preset(t, s, "p", 5)
	const ready, claimers = 5, 12
	for i := range ready {
		f.prebuilt(t, s, p, fmt.Sprintf("r%d", i), t0, &build.Outcome{State: []byte(`{}`)})
	}
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for i := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, _, ok, err := s.ClaimPrebuild(ctx, p.ID, f.Version.ID, func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
				w := rec.Workspace
				w.OwnerID, w.OwnerName, w.Name = f.User.ID, f.User.Username, fmt.Sprintf("c%d", i)
				b := f.Build(w, 2, build.Start, t0)
				b.IsPrebuildClaim = true
				return afterBuild(w, b, t0), &b, nil
			})
			if err != nil {
				t.Errorf("claim %d: %v", i, err)
				return
			}
			if ok {
				mu.Lock()
				got[w.ID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(got) != ready {
		t.Fatalf("%d instances claimed, want %d", len(got), ready)
	}
	for id, n := range got {
		if n != 1 {
			t.Fatalf("instance %s claimed %d times", id, n)
		}
	}
}
