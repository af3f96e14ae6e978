package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

func auditEntry(at time.Time, actor string, action audit.Action, kind, target string, outcome audit.Outcome) audit.Entry {
	e := audit.Entry{Time: at, Actor: audit.Actor{ID: "id-" + actor, Name: actor}, Action: action,
		Target: audit.Target{Kind: kind, ID: "id-" + target, Name: target}, Outcome: outcome}
	if outcome == audit.Failure {
		e.Error = "refused"
	}
	return e
}

func listAudit(t testing.TB, s store.Store, f audit.Filter) []audit.Entry {
	t.Helper()
	es, err := s.ListAudit(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func targets(es []audit.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Target.Name
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func testAuditList(t *testing.T, s store.Store) {
	ctx := context.Background()
	if es := listAudit(t, s, audit.Filter{}); len(es) != 0 {
		t.Fatalf("a new store's audit log = %+v, want none", es)
	}
	in := []audit.Entry{
		auditEntry(t0, "alice", audit.WorkspaceCreate, audit.KindWorkspace, "alice/dev", audit.Success),
		auditEntry(t0.Add(time.Minute), "alice", audit.WorkspaceTransition, audit.KindWorkspace, "alice/dev", audit.Failure),
		auditEntry(t0.Add(2*time.Minute), "bob", audit.WorkspaceCreate, audit.KindWorkspace, "bob/dev", audit.Success),
		auditEntry(t0.Add(3*time.Minute), "admin", audit.UserCreate, audit.KindUser, "carol", audit.Success),
		auditEntry(t0.Add(4*time.Minute), "", audit.SignIn, "", "", audit.Failure),
		auditEntry(t0.Add(5*time.Minute), "alice", audit.WorkspaceCreate, audit.KindWorkspace, "alice/d_v", audit.Success),
	}
	in[0].Details = map[string]any{"template": "vm", "build_number": 1}
	in[4].Error = "invalid token \x00 quoted"
	for _, e := range in {
		if err := s.InsertAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	all := listAudit(t, s, audit.Filter{})
	if got := targets(all); !equal(got, []string{"alice/d_v", "", "carol", "bob/dev", "alice/dev", "alice/dev"}) {
		t.Fatalf("every entry, newest first: %q", got)
	}
	for i := 1; i < len(all); i++ {
		if all[i].ID >= all[i-1].ID {
			t.Fatalf("ids not decreasing: %d then %d", all[i-1].ID, all[i].ID)
		}
	}
	first := all[len(all)-1]
	if !first.Time.Equal(t0) || first.Actor != (audit.Actor{ID: "id-alice", Name: "alice"}) || first.Action != audit.WorkspaceCreate ||
		first.Target != (audit.Target{Kind: audit.KindWorkspace, ID: "id-alice/dev", Name: "alice/dev"}) || first.Outcome != audit.Success ||
		first.Error != "" || first.Details["template"] != "vm" || first.Details["build_number"] != float64(1) {
		t.Fatalf("the first entry read back = %+v", first)
	}
	if e := all[1]; e.Outcome != audit.Failure || e.Error != "invalid token \uFFFD quoted" || e.Actor.Name != "" {
		t.Fatalf("the failed sign-in read back = %+v", e)
	}
	for _, tc := range []struct {
		name string
		f    audit.Filter
		want []string
	}{
		{"actor", audit.Filter{ActorName: "alice"}, []string{"alice/d_v", "alice/dev", "alice/dev"}},
		{"action", audit.Filter{Action: audit.WorkspaceCreate}, []string{"alice/d_v", "bob/dev", "alice/dev"}},
		{"target kind", audit.Filter{TargetKind: audit.KindUser}, []string{"carol"}},
		{"target by owner/name", audit.Filter{TargetName: "alice/dev"}, []string{"alice/dev", "alice/dev"}},
		{"target by name alone matches every owner's", audit.Filter{TargetName: "dev"}, []string{"bob/dev", "alice/dev", "alice/dev"}},
		{"a target's _ is no wildcard", audit.Filter{TargetName: "d_v"}, []string{"alice/d_v"}},
		{"a target's % is no wildcard", audit.Filter{TargetName: "%"}, []string{}},
		{"outcome", audit.Filter{Outcome: audit.Failure}, []string{"", "alice/dev"}},
		{"since (inclusive)", audit.Filter{Since: t0.Add(3 * time.Minute)}, []string{"alice/d_v", "", "carol"}},
		{"until (exclusive)", audit.Filter{Until: t0.Add(2 * time.Minute)}, []string{"alice/dev", "alice/dev"}},
		{"combined", audit.Filter{ActorName: "alice", Action: audit.WorkspaceCreate, Since: t0.Add(time.Second)}, []string{"alice/d_v"}},
		{"limit", audit.Filter{Limit: 2}, []string{"alice/d_v", ""}},
		{"page after the first two", audit.Filter{Limit: 2, BeforeID: all[1].ID}, []string{"carol", "bob/dev"}},
		{"last page", audit.Filter{Limit: 2, BeforeID: all[3].ID}, []string{"alice/dev", "alice/dev"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := targets(listAudit(t, s, tc.f)); !equal(got, tc.want) {
				t.Fatalf("ListAudit(%+v) = %q, want %q", tc.f, got, tc.want)
			}
		})
	}
	for i := 0; i < audit.MaxLimit+5; i++ {
		if err := s.InsertAudit(ctx, auditEntry(t0, "many", audit.SignIn, audit.KindUser, "many", audit.Success)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(listAudit(t, s, audit.Filter{Limit: audit.MaxLimit * 10})); n != audit.MaxLimit {
		t.Fatalf("a limit over the maximum listed %d, want %d", n, audit.MaxLimit)
	}
	if n := len(listAudit(t, s, audit.Filter{})); n != audit.DefaultLimit {
		t.Fatalf("no limit listed %d, want the default %d", n, audit.DefaultLimit)
	}
}

// testAuditInTx: an entry pending in the context is written by the audited write, in its
// transaction: with it when it commits, not at all when it fails; other writes never write it.
func testAuditInTx(t *testing.T, s store.Store) {
	clk := clock.NewFake(t0)
	rec := &audit.Recorder{W: s, Now: clk.Now}
	f := NewFixture(t, s, "atx")
	f.Create(t, s, f.Workspace("ws"))
	actor := audit.Actor{ID: f.User.ID, Name: f.User.Username}
	target := audit.Target{Kind: audit.KindWorkspace, Name: f.User.Username + "/ws"}

	// Committed: one success, written by UpdateWorkspace; End writes nothing more.
	ctx, p := rec.Begin(context.Background(), actor, audit.WorkspaceTransition, target)
	_, err := s.UpdateWorkspace(ctx, f.Ref("ws"), func(w workspace.Workspace) (workspace.Workspace, error) {
		audit.From(ctx).Set("to", "Stopped")
		w.DesiredState = workspace.Stopped
		return w, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if es := listAudit(t, s, audit.Filter{}); len(es) != 1 || es[0].Outcome != audit.Success || es[0].Details["to"] != "Stopped" {
		t.Fatalf("after a committed change: %+v, want its success", es)
	}
	rec.End(ctx, p, nil)
	if es := listAudit(t, s, audit.Filter{}); len(es) != 1 {
		t.Fatalf("End after the transaction wrote it: %d entries, want 1", len(es))
	}

	// Refused: the transaction writes nothing, End writes the failure.
	refused := errors.New("illegal state change")
	ctx, p = rec.Begin(context.Background(), actor, audit.WorkspaceTransition, target)
	_, err = s.UpdateWorkspace(ctx, f.Ref("ws"), func(w workspace.Workspace) (workspace.Workspace, error) {
		w.DesiredState = workspace.Running
		return w, refused
	})
	if !errors.Is(err, refused) {
		t.Fatal(err)
	}
	if es := listAudit(t, s, audit.Filter{}); len(es) != 1 {
		t.Fatalf("a refused change wrote an entry in its transaction: %+v", es)
	}
	rec.End(ctx, p, err)
	es := listAudit(t, s, audit.Filter{})
	if len(es) != 2 || es[0].Outcome != audit.Failure || es[0].Error != "illegal state change" {
		t.Fatalf("after End of a refused change: %+v", es)
	}
	if w, _ := s.Workspace(context.Background(), f.Ref("ws")); w.DesiredState != workspace.Stopped {
		t.Fatalf("the refused change was written: desired %s", w.DesiredState)
	}

	// Discarded: nothing.
	ctx, p = rec.Begin(context.Background(), actor, audit.WorkspaceTransition, target)
	if _, err := s.UpdateWorkspace(ctx, f.Ref("ws"), func(w workspace.Workspace) (workspace.Workspace, error) {
		audit.From(ctx).Discard()
		return w, nil
	}); err != nil {
		t.Fatal(err)
	}
	rec.End(ctx, p, nil)
	if n := len(listAudit(t, s, audit.Filter{})); n != 2 {
		t.Fatalf("a discarded entry was written: %d entries", n)
	}

	// A write that is no action (a build's log lines) leaves the entry pending; the action's
	// transaction writes it.
	bf := NewBuildFixture(t, s, "atx2")
	tw, b := bf.Create(t, s, "tf", t0)
	ctx, p = rec.Begin(context.Background(), actor, audit.BuildCancel, audit.Target{Kind: audit.KindWorkspace, Name: "x/tf"})
	if err := s.AppendLogs(ctx, b.Job.ID, logLines(0, 1, t0)); err != nil {
		t.Fatal(err)
	}
	if n := len(listAudit(t, s, audit.Filter{})); n != 2 {
		t.Fatalf("AppendLogs wrote the pending entry: %d entries", n)
	}
	if _, err := s.UpdateBuild(ctx, b.Job.ID, func(rec store.BuildRecord) (store.BuildRecord, error) {
		nb, err := build.Cancel(*rec.Build, "x", t0)
		rec.Build = &nb
		return rec, err
	}); err != nil {
		t.Fatal(err)
	}
	rec.End(ctx, p, nil)
	if es := listAudit(t, s, audit.Filter{Action: audit.BuildCancel}); len(es) != 1 || es[0].Outcome != audit.Success {
		t.Fatalf("the cancel's entries: %+v", es)
	}
	_ = tw

	// An action without a transaction of its own (Record) is written at once.
	rec.Record(context.Background(), audit.Actor{}, audit.SignIn, audit.Target{}, errors.New("invalid token"), map[string]any{"remote": "127.0.0.1"})
	if es := listAudit(t, s, audit.Filter{Action: audit.SignIn}); len(es) != 1 || es[0].Outcome != audit.Failure || es[0].Details["remote"] != "127.0.0.1" {
		t.Fatalf("a recorded failed sign-in: %+v", es)
	}

	// Each audited create writes the entry with it (one of them here: CreateUser), and not when
	// it fails (a taken name).
	ctx, p = rec.Begin(context.Background(), actor, audit.UserCreate, audit.Target{Kind: audit.KindUser, Name: "dave"})
	if err := s.CreateUser(ctx, workspace.User{ID: uuid.NewString(), Username: "dave", TokenHash: []byte("dave"), CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	rec.End(ctx, p, nil)
	ctx, p = rec.Begin(context.Background(), actor, audit.UserCreate, audit.Target{Kind: audit.KindUser, Name: "dave"})
	err = s.CreateUser(ctx, workspace.User{ID: uuid.NewString(), Username: "dave", TokenHash: []byte("dave2"), CreatedAt: t0})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second dave: %v", err)
	}
	rec.End(ctx, p, err)
	if es := listAudit(t, s, audit.Filter{Action: audit.UserCreate}); len(es) != 2 || es[0].Outcome != audit.Failure || es[1].Outcome != audit.Success {
		t.Fatalf("user creations: %+v", es)
	}
}

func testAuditPrune(t *testing.T, s store.Store) {
	ctx := context.Background()
	for i := 0; i < 7; i++ {
		if err := s.InsertAudit(ctx, auditEntry(t0.Add(time.Duration(i)*time.Hour), "a", audit.SignIn, audit.KindUser, "a", audit.Success)); err != nil {
			t.Fatal(err)
		}
	}
	// Five are older than t0+5h; a pass deletes at most 3, the oldest first.
	if n, err := s.PruneAudit(ctx, t0.Add(5*time.Hour), 3); err != nil || n != 3 {
		t.Fatalf("first pass = %d, %v; want 3", n, err)
	}
	es := listAudit(t, s, audit.Filter{})
	if len(es) != 4 || !es[len(es)-1].Time.Equal(t0.Add(3*time.Hour)) {
		t.Fatalf("after the first pass: %d entries, oldest %v", len(es), es[len(es)-1].Time)
	}
	if n, err := s.PruneAudit(ctx, t0.Add(5*time.Hour), 3); err != nil || n != 2 {
		t.Fatalf("second pass = %d, %v; want 2", n, err)
	}
	if n, err := s.PruneAudit(ctx, t0.Add(5*time.Hour), 3); err != nil || n != 0 {
		t.Fatalf("third pass = %d, %v; want 0", n, err)
	}
	if es := listAudit(t, s, audit.Filter{}); len(es) != 2 || !es[1].Time.Equal(t0.Add(5*time.Hour)) {
		t.Fatalf("kept: %+v", es)
	}
}

func testBuildLogLevel(t *testing.T, s store.Store) {
	ctx := context.Background()
	bf := NewBuildFixture(t, s, "ll")
	w := bf.TerraformWorkspace("dbg")
	b := bf.Build(w, 1, build.Start, t0)
	b.LogLevel = build.LogDebug
	if err := s.CreateBuildWorkspace(ctx, w, b); err != nil {
		t.Fatal(err)
	}
	if got, err := s.BuildByNumber(ctx, w.ID, 1); err != nil || got.LogLevel != build.LogDebug {
		t.Fatalf("a debug build read back: %q, %v", got.LogLevel, err)
	}
	got, ok, err := s.AcquireJob(ctx, "w", t0)
	if err != nil || !ok || got.LogLevel != build.LogDebug {
		t.Fatalf("the debug build acquired: %q, %v, %v", got.LogLevel, ok, err)
	}
	_, nb, err := s.NewBuild(ctx, store.WorkspaceRef{ID: w.ID}, func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
		return rec.Workspace, nil, nil
	})
	if err != nil || nb != nil {
		t.Fatal(nb, err)
	}
	if bs, err := s.ListBuilds(ctx, w.ID); err != nil || len(bs) != 1 || bs[0].LogLevel != build.LogDebug {
		t.Fatalf("ListBuilds: %+v, %v", bs, err)
	}
}
