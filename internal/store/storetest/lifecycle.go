package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// testLifecycleColumns: a workspace's schedule, dormancy and reason round-trip through
// CreateWorkspace, UpdateWorkspace and builds, and a reconcile leaves them.
func testLifecycleColumns(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "lc")
	ttl := 90 * time.Minute
	w := f.Workspace("sched")
	w.Schedule = workspace.Schedule{Autostart: "0 9 * * 1-5", Timezone: "Europe/Paris", TTL: &ttl}
	f.Create(t, s, w)
	got, err := s.Workspace(ctx, f.Ref("sched"))
	if err != nil || got.Schedule.Autostart != "0 9 * * 1-5" || got.Schedule.Timezone != "Europe/Paris" || got.Schedule.TTL == nil ||
		*got.Schedule.TTL != ttl || got.DormantAt != nil || got.DesiredStateReason != "" {
		t.Fatalf("created: %+v, %v", got, err)
	}
	dormant := t0.Add(time.Hour)
	if _, err := s.UpdateWorkspace(ctx, f.Ref("sched"), func(w workspace.Workspace) (workspace.Workspace, error) {
		w.DesiredState, w.DesiredStateUpdatedAt = workspace.Stopped, dormant
		w.DormantAt, w.DesiredStateReason = &dormant, "dormancy: unused for 1h0m0s"
		w.Schedule.TTL = nil
		return w, nil
	}); err != nil {
		t.Fatal(err)
	}
	// A reconcile writes its own columns only.
	if err := s.Reconcile(ctx, store.ReconcileScope{AgentID: f.Agent.ID, Full: true}, func(_ store.ReconcileTx, rows []workspace.Workspace) ([]workspace.Workspace, error) {
		for i := range rows {
			rows[i].ActualState, rows[i].DormantAt, rows[i].DesiredStateReason = workspace.Stopped, nil, "clobbered"
		}
		return rows, nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err = s.Workspace(ctx, f.Ref("sched"))
	if err != nil || got.DormantAt == nil || !got.DormantAt.Equal(dormant) || got.DesiredStateReason != "dormancy: unused for 1h0m0s" ||
		got.Schedule.TTL != nil || got.Schedule.Autostart != "0 9 * * 1-5" || got.ActualState != workspace.Stopped {
		t.Fatalf("after update and reconcile: %+v, %v", got, err)
	}

	// Builds write the reason and dormancy of the row they were given.
	bf := NewBuildFixture(t, s, "lcb")
	tw, _ := bf.Create(t, s, "tf", t0)
	if _, _, err := s.NewBuild(ctx, store.WorkspaceRef{ID: tw.ID}, func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
		b := bf.Build(rec.Workspace, 2, build.Stop, t0)
		w := rec.Workspace
		w.DesiredState, w.DesiredStateReason = workspace.Stopped, "autostop: TTL 1h0m0s"
		return w, &b, nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err = s.Workspace(ctx, store.WorkspaceRef{ID: tw.ID})
	if err != nil || got.DesiredStateReason != "autostop: TTL 1h0m0s" {
		t.Fatalf("after a build: %+v, %v", got, err)
	}
}

// testTemplateLifecycle: a template's policy is stored and read back.
func testTemplateLifecycle(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "tl")
	if !reflect.DeepEqual(f.Template.Lifecycle, workspace.Lifecycle{}) {
		t.Fatalf("new template's lifecycle = %+v, want none", f.Template.Lifecycle)
	}
	l := workspace.Lifecycle{DefaultTTL: workspace.Duration(8 * time.Hour), FailureTTL: workspace.Duration(time.Hour),
		Activity: workspace.ActivityWork, ActivityProcesses: []string{"make", "go test"}, ActivityCPU: 0.25}
	got, err := s.SetTemplateLifecycle(ctx, f.Template.Name, l)
	if err != nil || !reflect.DeepEqual(got.Lifecycle, l) {
		t.Fatalf("SetTemplateLifecycle = %+v, %v", got, err)
	}
	if got, err := s.TemplateByName(ctx, f.Template.Name); err != nil || !reflect.DeepEqual(got.Lifecycle, l) {
		t.Fatalf("TemplateByName = %+v, %v", got, err)
	}
	if _, err := s.SetTemplateLifecycle(ctx, "nope", l); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown template: %v, want ErrNotFound", err)
	}
}

// testAutomationUser: the automation's system user exists (builds name it), but is never found
// by token or username, is not counted, and cannot be given a token.
func testAutomationUser(t *testing.T, s store.Store) {
	ctx := context.Background()
	if n, err := s.CountUsers(ctx); err != nil || n != 0 {
		t.Fatalf("CountUsers = %d, %v; want 0 (the automation is not counted)", n, err)
	}
	if _, err := s.UserByUsername(ctx, store.AutomationUsername); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("UserByUsername(automation): %v, want ErrNotFound", err)
	}
	if _, _, err := s.TokenByHash(ctx, []byte{0}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("TokenByHash(its hash): %v, want ErrNotFound", err)
	}
	if err := s.ResetUserTokens(ctx, store.AutomationUserID, store.APIToken{ID: uuid.NewString(), Name: "x", Hash: []byte("h"), CreatedAt: t0}, t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ResetUserTokens(automation): %v, want ErrNotFound", err)
	}
	u := workspace.User{ID: uuid.NewString(), Username: store.AutomationUsername, TokenHash: []byte("x"), CreatedAt: t0}
	if err := s.CreateUser(ctx, u); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a person named %s: %v, want ErrConflict", store.AutomationUsername, err)
	}
	// A build it initiates names it.
	bf := NewBuildFixture(t, s, "au")
	tw, _ := bf.Create(t, s, "tf", t0)
	_, b, err := s.NewBuild(ctx, store.WorkspaceRef{ID: tw.ID}, func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
		b := bf.Build(rec.Workspace, 2, build.Stop, t0)
		b.InitiatorID, b.Reason = store.AutomationUserID, build.ReasonAutostop
		return rec.Workspace, &b, nil
	})
	if err != nil || b.InitiatorName != store.AutomationUsername || b.Reason != build.ReasonAutostop {
		t.Fatalf("automation's build = %+v, %v", b, err)
	}
}
