// Package storetest is the test suite every store.Store adapter passes: the sqlite and postgres
// packages run it against a real database.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

var t0 = time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC)

// Run runs the suite; open returns a new, empty, migrated store for each subtest.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Users", testUsers},
		{"Agents", testAgents},
		{"WorkspaceRoundTrip", testWorkspaceRoundTrip},
		{"Quotas", testQuotas},
		{"ReconcileScope", testReconcileScope},
		{"ReconcileRollsBackOnError", testReconcileRollback},
		{"ReconcileReadsInItsTransaction", testReconcileTx},
		{"ConcurrentUserAndAgentLoseNothing", testConcurrentWriters},
		{"BatchUpdate", testBatchUpdate},
		{"PendingAndNotifications", testPending},
		{"NamesPerOwner", testNamesPerOwner},
		{"NameFreeOnceTerminated", testNameFreeOnceTerminated},
		{"Sessions", testSessions},
		{"OIDC", testOIDC},
		{"ExternalAuthLinks", testExternalAuthLinks},
		{"ExternalAuthStates", testExternalAuthStates},
		{"GitSSHKeys", testGitSSHKeys},
		{"Profile", testProfile},
		{"Tokens", testTokens},
		{"SuspendAndDeleteUsers", testSuspendAndDelete},
		{"LastAdminStays", testLastAdmin},
		{"AgentAndProvisionerTokens", testAgentAndProvisionerTokens},
		{"Revocations", testRevocations},
		{"SSHKeys", testSSHKeys},
		{"Activity", testActivity},
		{"AgentTokens", testAgentTokens},
		{"AgentConnections", testAgentConnections},
		{"HelperRecord", testHelperRecord},
		{"WorkspaceActivity", testWorkspaceActivity},
		{"LifecycleColumns", testLifecycleColumns},
		{"TemplateLifecycle", testTemplateLifecycle},
		{"AutomationUser", testAutomationUser},
		{"AuditListFilterPage", testAuditList},
		{"AuditInTheActionsTransaction", testAuditInTx},
		{"AuditPrune", testAuditPrune},
		{"BuildLogLevel", testBuildLogLevel},
		{"WorkspaceChanges", testWorkspaceChanges},
		{"WorkspaceRepository", testWorkspaceRepository},
		{"WorkspaceDotfiles", testWorkspaceDotfiles},
		{"StartupSteps", testStartupSteps},
		{"ServerKeys", testServerKeys},
		{"WorkspaceMetadata", testWorkspaceMetadata},
		{"WorkspaceAlerts", testWorkspaceAlerts},
	}
	tests = append(tests, buildTests...)
	tests = append(tests, presetTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// Fixture holds a user and an agent to hang workspaces on.
type Fixture struct {
	User  workspace.User
	Agent workspace.Agent
}

// NewFixture creates a user and an agent with default config.
func NewFixture(t testing.TB, s store.Store, name string) Fixture {
	t.Helper()
	ctx := context.Background()
	u := workspace.User{ID: uuid.NewString(), Username: "user-" + name, TokenHash: []byte("u" + name), CreatedAt: t0}
	if err := s.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	a := workspace.Agent{ID: uuid.NewString(), Name: "agent-" + name, TokenHash: []byte("a" + name), Config: workspace.AgentConfig{}.WithDefaults(), CreatedAt: t0, UpdatedAt: t0}
	if err := s.CreateAgent(ctx, a); err != nil {
		t.Fatal(err)
	}
	return Fixture{User: u, Agent: a}
}

// Workspace returns a new workspace row of the fixture, desired Running, actual CreationRequested.
func (f Fixture) Workspace(name string) workspace.Workspace {
	return workspace.Workspace{
		ID: uuid.NewString(), Name: name, KubeName: name, OwnerID: f.User.ID, OwnerName: f.User.Username, AgentID: f.Agent.ID, AgentName: f.Agent.Name,
		Namespace: "hangar-" + name, Devfile: "schemaVersion: 2.2.0", DesiredState: workspace.Running, ActualState: workspace.CreationRequested,
		DesiredStateUpdatedAt: t0, URL: "https://3000-" + name + ".example.com/", CreatedAt: t0,
	}
}

// Ref names the fixture user's workspace of that name.
func (f Fixture) Ref(name string) store.WorkspaceRef {
	return store.WorkspaceRef{OwnerID: f.User.ID, Name: name}
}

// Create inserts workspaces with no quota.
func (f Fixture) Create(t testing.TB, s store.Store, ws ...workspace.Workspace) {
	t.Helper()
	for _, w := range ws {
		if err := s.CreateWorkspace(context.Background(), w, -1, -1); err != nil {
			t.Fatal(err)
		}
	}
}

func testUsers(t *testing.T, s store.Store) {
	ctx := context.Background()
	if n, err := s.CountUsers(ctx); err != nil || n != 0 {
		t.Fatalf("CountUsers = %d, %v; want 0", n, err)
	}
	u := workspace.User{ID: uuid.NewString(), Username: "alice", Admin: true, TokenHash: []byte("hash-a"), CreatedAt: t0}
	if err := s.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	tok, got, err := s.TokenByHash(ctx, []byte("hash-a"))
	if err != nil || got.Username != "alice" || !got.Admin || !got.CreatedAt.Equal(t0) || got.SuspendedAt != nil || got.TokenHash != nil ||
		tok.Name != "initial" || tok.UserID != u.ID || tok.ExpiresAt != nil || tok.RevokedAt != nil || !tok.CreatedAt.Equal(t0) {
		t.Fatalf("TokenByHash = %+v, %+v, %v", tok, got, err)
	}
	if _, _, err := s.TokenByHash(ctx, []byte("nope")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown token: %v, want ErrNotFound", err)
	}
	dup := u
	dup.ID, dup.TokenHash = uuid.NewString(), []byte("hash-b")
	if err := s.CreateUser(ctx, dup); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate username: %v, want ErrConflict", err)
	}
	if got, err := s.UserByUsername(ctx, "alice"); err != nil || got.ID != u.ID {
		t.Fatalf("UserByUsername = %+v, %v", got, err)
	}
	if n, _ := s.CountUsers(ctx); n != 1 {
		t.Fatalf("CountUsers = %d after a refused duplicate, want 1", n)
	}
}

func testAgents(t *testing.T, s store.Store) {
	ctx := context.Background()
	cfg := workspace.AgentConfig{DNSZone: "ws.example.com", Labels: map[string]string{"team": "a"}}.WithDefaults()
	a := workspace.Agent{ID: uuid.NewString(), Name: "k1", TokenHash: []byte("t1"), Config: cfg, CreatedAt: t0, UpdatedAt: t0}
	if err := s.CreateAgent(ctx, a); err != nil {
		t.Fatal(err)
	}
	got, err := s.AgentByTokenHash(ctx, []byte("t1"))
	if err != nil || got.Name != "k1" || got.Config.DNSZone != "ws.example.com" || got.Config.Labels["team"] != "a" {
		t.Fatalf("AgentByTokenHash = %+v, %v", got, err)
	}
	if _, err := s.AgentByName(ctx, "k2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("AgentByName(k2): %v, want ErrNotFound", err)
	}
	b := a
	b.ID, b.TokenHash = uuid.NewString(), []byte("t2")
	if err := s.CreateAgent(ctx, b); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate agent: %v, want ErrConflict", err)
	}
	list, err := s.ListAgents(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("ListAgents = %+v, %v", list, err)
	}
}

func testWorkspaceRoundTrip(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "rt")
	w := f.Workspace("alpha")
	f.Create(t, s, w)
	got, err := s.Workspace(ctx, f.Ref("alpha"))
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != w.ID || got.OwnerName != f.User.Username || got.AgentName != f.Agent.Name || got.RespondedToAgentAt != nil ||
		got.ActualStateUpdatedAt != nil || got.DeploymentResourceVersion != nil || got.URL != w.URL || !got.DesiredStateUpdatedAt.Equal(t0) {
		t.Fatalf("read back %+v", got)
	}
	if text, err := s.WorkspaceDevfile(ctx, w.ID); err != nil || text != w.Devfile {
		t.Fatalf("WorkspaceDevfile = %q, %v; want %q", text, err, w.Devfile)
	}
	if _, err := s.WorkspaceDevfile(ctx, uuid.NewString()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("WorkspaceDevfile of unknown id: %v", err)
	}
	dup := f.Workspace("alpha")
	if err := s.CreateWorkspace(ctx, dup, -1, -1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate name: %v, want ErrConflict", err)
	}
	at := t0.Add(90*time.Second + 123*time.Microsecond)
	rv := "42"
	updated, err := s.UpdateWorkspace(ctx, f.Ref("alpha"), func(w workspace.Workspace) (workspace.Workspace, error) {
		w.DesiredState, w.ActualState, w.RespondedToAgentAt, w.DeploymentResourceVersion = workspace.Stopped, workspace.Stopping, &at, &rv
		w.ErrorType, w.ErrorMessage = "applier", "boom"
		return w, nil
	})
	if err != nil || updated.DesiredState != workspace.Stopped {
		t.Fatalf("UpdateWorkspace = %+v, %v", updated, err)
	}
	got, _ = s.Workspace(ctx, f.Ref("alpha"))
	if got.DesiredState != workspace.Stopped || got.ActualState != workspace.Stopping || !got.RespondedToAgentAt.Equal(at) ||
		*got.DeploymentResourceVersion != "42" || got.ErrorMessage != "boom" {
		t.Fatalf("after update: %+v", got)
	}
	refused := errors.New("refused")
	if _, err := s.UpdateWorkspace(ctx, f.Ref("alpha"), func(w workspace.Workspace) (workspace.Workspace, error) {
		w.DesiredState = workspace.Terminated
		return w, refused
	}); !errors.Is(err, refused) {
		t.Fatalf("fn error: %v", err)
	}
	if got, _ := s.Workspace(ctx, f.Ref("alpha")); got.DesiredState != workspace.Stopped {
		t.Fatalf("a refused update was written: %s", got.DesiredState)
	}
	if _, err := s.UpdateWorkspace(ctx, f.Ref("nope"), func(w workspace.Workspace) (workspace.Workspace, error) { return w, nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update of unknown workspace: %v", err)
	}
	list, err := s.ListWorkspaces(ctx, store.ListFilter{OwnerID: f.User.ID})
	if err != nil || len(list) != 1 {
		t.Fatalf("ListWorkspaces(owner) = %d, %v", len(list), err)
	}
	if list, _ := s.ListWorkspaces(ctx, store.ListFilter{OwnerID: uuid.NewString()}); len(list) != 0 {
		t.Fatalf("ListWorkspaces(other owner) = %d", len(list))
	}
	counts, err := s.CountWorkspacesByState(ctx)
	if err != nil || counts[[2]workspace.State{workspace.Stopped, workspace.Stopping}] != 1 {
		t.Fatalf("CountWorkspacesByState = %v, %v", counts, err)
	}
}

func testQuotas(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "q")
	if err := s.CreateWorkspace(ctx, f.Workspace("a"), 0, -1); !errors.Is(err, store.ErrQuota) {
		t.Fatalf("agent quota 0: %v, want ErrQuota", err)
	}
	if err := s.CreateWorkspace(ctx, f.Workspace("a"), 2, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateWorkspace(ctx, f.Workspace("b"), 2, 1); !errors.Is(err, store.ErrQuota) {
		t.Fatalf("per-user quota 1: %v, want ErrQuota", err)
	}
	// A terminated workspace no longer counts.
	if _, err := s.UpdateWorkspace(ctx, f.Ref("a"), func(w workspace.Workspace) (workspace.Workspace, error) {
		w.DesiredState = workspace.Terminated
		return w, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateWorkspace(ctx, f.Workspace("b"), 2, 1); err != nil {
		t.Fatalf("after terminating a: %v", err)
	}
	if list, _ := s.ListWorkspaces(ctx, store.ListFilter{}); len(list) != 2 {
		t.Fatalf("%d workspaces, want 2 (nothing partially written)", len(list))
	}
}

func names(ws []workspace.Workspace) map[string]bool {
	m := map[string]bool{}
	for _, w := range ws {
		m[w.Name] = true
	}
	return m
}

func testReconcileScope(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "sc")
	other := NewFixture(t, s, "other")
	r1 := t0.Add(time.Minute)
	mk := func(name string, desired, actual workspace.State, desiredAt time.Time, responded *time.Time) workspace.Workspace {
		w := f.Workspace(name)
		w.DesiredState, w.ActualState, w.DesiredStateUpdatedAt, w.RespondedToAgentAt = desired, actual, desiredAt, responded
		return w
	}
	f.Create(t, s,
		mk("never", workspace.Running, workspace.CreationRequested, t0, nil),
		mk("changed", workspace.Stopped, workspace.Running, t0.Add(2*time.Minute), &r1),
		mk("quiet", workspace.Running, workspace.Running, t0, &r1),
		mk("same-time", workspace.Running, workspace.Running, r1, &r1),
		mk("gone", workspace.Terminated, workspace.Terminated, t0, &r1),
	)
	other.Create(t, s, other.Workspace("foreign"))

	var got []workspace.Workspace
	read := func(scope store.ReconcileScope) map[string]bool {
		t.Helper()
		if err := s.Reconcile(ctx, scope, func(_ store.ReconcileTx, rows []workspace.Workspace) ([]workspace.Workspace, error) {
			got = rows
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
		return names(got)
	}
	want := func(what string, got map[string]bool, names ...string) {
		t.Helper()
		if len(got) != len(names) {
			t.Errorf("%s read %v, want %v", what, got, names)
			return
		}
		for _, n := range names {
			if !got[n] {
				t.Errorf("%s read %v, want %v", what, got, names)
			}
		}
	}
	want("partial", read(store.ReconcileScope{AgentID: f.Agent.ID}), "never", "changed")
	want("partial+names", read(store.ReconcileScope{AgentID: f.Agent.ID, KubeNames: []string{"quiet", "gone", "foreign", "unknown"}}), "never", "changed", "quiet", "gone")
	want("full", read(store.ReconcileScope{AgentID: f.Agent.ID, Full: true}), "never", "changed", "quiet", "same-time")
	want("full+names", read(store.ReconcileScope{AgentID: f.Agent.ID, Full: true, KubeNames: []string{"gone"}}), "never", "changed", "quiet", "same-time", "gone")
	// An agent with nothing pending, reporting nothing (the store's read without a transaction).
	settled := NewFixture(t, s, "settled")
	q := settled.Workspace("settled-quiet")
	q.ActualState, q.RespondedToAgentAt = workspace.Running, &r1
	settled.Create(t, s, q)
	want("partial, nothing pending", read(store.ReconcileScope{AgentID: settled.Agent.ID}))
	want("partial, nothing pending, a name", read(store.ReconcileScope{AgentID: settled.Agent.ID, KubeNames: []string{q.KubeName}}), "settled-quiet")
}

func testReconcileRollback(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "rb")
	f.Create(t, s, f.Workspace("x"))
	boom := errors.New("boom")
	err := s.Reconcile(ctx, store.ReconcileScope{AgentID: f.Agent.ID}, func(_ store.ReconcileTx, rows []workspace.Workspace) ([]workspace.Workspace, error) {
		rows[0].ActualState = workspace.Running
		return rows, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Reconcile = %v, want boom", err)
	}
	if w, _ := s.Workspace(ctx, f.Ref("x")); w.ActualState != workspace.CreationRequested {
		t.Fatalf("rolled-back reconcile wrote actual %s", w.ActualState)
	}
}

// testReconcileTx: fn reads a workspace's devfile through its transaction, for the rows it was
// given and for an unknown id (ErrNotFound, and the transaction goes on).
func testReconcileTx(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "tx")
	w := f.Workspace("x")
	w.Devfile = "schemaVersion: 2.2.0\nmetadata:\n  name: x-devfile\n"
	f.Create(t, s, w)
	later := t0.Add(time.Minute)
	if err := s.Reconcile(ctx, store.ReconcileScope{AgentID: f.Agent.ID, Full: true}, func(tx store.ReconcileTx, rows []workspace.Workspace) ([]workspace.Workspace, error) {
		if len(rows) != 1 {
			return nil, fmt.Errorf("read %d rows, want 1", len(rows))
		}
		if text, err := tx.WorkspaceDevfile(rows[0].ID); err != nil || text != w.Devfile {
			return nil, fmt.Errorf("WorkspaceDevfile in the transaction = %q, %v; want %q", text, err, w.Devfile)
		}
		if _, err := tx.WorkspaceDevfile(uuid.NewString()); !errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("WorkspaceDevfile of an unknown id: %v, want ErrNotFound", err)
		}
		rows[0].RespondedToAgentAt = &later
		return rows, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Workspace(ctx, f.Ref("x")); got.RespondedToAgentAt == nil || !got.RespondedToAgentAt.Equal(later) {
		t.Fatalf("after the reconcile: responded %v, want %v", got.RespondedToAgentAt, later)
	}
}

// testConcurrentWriters runs users changing the desired state and agents reporting on the same row
// at the same time, each a read-modify-write of the whole row that increments what it read (users:
// desired_state_updated_at by one second; agents: the resource version by one). Any lost update
// shows in the final counts.
func testConcurrentWriters(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "cc")
	f.Create(t, s, f.Workspace("hot"))
	const writers, n = 2, 50
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for g := 0; g < writers; g++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				if _, err := s.UpdateWorkspace(ctx, f.Ref("hot"), func(w workspace.Workspace) (workspace.Workspace, error) {
					w.DesiredState = workspace.Stopped
					w.DesiredStateUpdatedAt = w.DesiredStateUpdatedAt.Add(time.Second)
					return w, nil
				}); err != nil {
					errs <- fmt.Errorf("user update %d: %w", i, err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				if err := s.Reconcile(ctx, store.ReconcileScope{AgentID: f.Agent.ID, KubeNames: []string{"hot"}}, func(_ store.ReconcileTx, rows []workspace.Workspace) ([]workspace.Workspace, error) {
					for j := range rows {
						v := 0
						if rows[j].DeploymentResourceVersion != nil {
							fmt.Sscan(*rows[j].DeploymentResourceVersion, &v)
						}
						rv := fmt.Sprint(v + 1)
						rows[j].DeploymentResourceVersion = &rv
						rows[j].ActualState = workspace.Starting
					}
					return rows, nil
				}); err != nil {
					errs <- fmt.Errorf("reconcile %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	w, err := s.Workspace(ctx, f.Ref("hot"))
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(writers * n * time.Second); w.DesiredState != workspace.Stopped || !w.DesiredStateUpdatedAt.Equal(want) {
		t.Errorf("users' updates lost: desired %s at %s, want at %s", w.DesiredState, w.DesiredStateUpdatedAt, want)
	}
	if w.DeploymentResourceVersion == nil || *w.DeploymentResourceVersion != fmt.Sprint(writers*n) || w.ActualState != workspace.Starting {
		t.Errorf("agents' updates lost: resource version %v (want %d), actual %s", *w.DeploymentResourceVersion, writers*n, w.ActualState)
	}
}

func testBatchUpdate(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "bu")
	const n = 2500 // more than one batch on SQLite
	ws := make([]workspace.Workspace, n)
	for i := range ws {
		ws[i] = f.Workspace(fmt.Sprintf("w%04d", i))
	}
	f.Create(t, s, ws...)
	at := t0.Add(time.Hour)
	for i := range ws {
		ws[i].RespondedToAgentAt = &at
		ws[i].ActualState = workspace.Running
	}
	if err := s.UpdateWorkspacesBatch(ctx, ws); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListWorkspaces(ctx, store.ListFilter{})
	if err != nil || len(list) != n {
		t.Fatalf("list: %d, %v", len(list), err)
	}
	for _, w := range list {
		if w.ActualState != workspace.Running || w.RespondedToAgentAt == nil || !w.RespondedToAgentAt.Equal(at) || w.DeploymentResourceVersion != nil {
			t.Fatalf("after batch update: %+v", w)
		}
	}
}

// Settler returns a barrier for "no wake-up is on its way": settle() creates a workspace of an
// agent of its own and waits for the wake-up of that agent's subscriber. Wake-ups are delivered in
// commit order (in process on SQLite; through the store's one LISTEN connection on Postgres), so
// once it returns, every wake-up of an earlier commit has been delivered, and a Quiet channel is
// one that no earlier commit woke.
func Settler(t testing.TB, s store.Store) func() {
	f := NewFixture(t, s, "settle-"+uuid.NewString()[:8])
	ch, cancel := s.SubscribeAgent(f.Agent.ID)
	t.Cleanup(cancel)
	return func() {
		t.Helper()
		f.Create(t, s, f.Workspace("settle-"+uuid.NewString()[:8]))
		if !Woken(ch) {
			t.Fatal("settle: the barrier's own creation woke nobody")
		}
	}
}

// Woken reports whether ch receives within 10 s (a deadline for a failure, not a pause: a correct
// store wakes at once).
func Woken(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

// Quiet reports whether ch holds no wake-up now.
func Quiet(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

func testPending(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "pe")
	other := NewFixture(t, s, "po")
	pending := func(want bool, what string) {
		t.Helper()
		if got, err := s.HasPending(ctx, f.Agent.ID); err != nil || got != want {
			t.Fatalf("%s: HasPending = %v, %v; want %v", what, got, err, want)
		}
	}
	pending(false, "no workspace")
	ch, cancel := s.SubscribeAgent(f.Agent.ID)
	defer cancel()
	otherCh, otherCancel := s.SubscribeAgent(other.Agent.ID)
	defer otherCancel()
	settle := Settler(t, s)

	// Another agent's new workspace wakes its subscriber and makes nothing of f's pending.
	other.Create(t, s, other.Workspace("o1"))
	if !Woken(otherCh) {
		t.Fatal("creation did not wake its agent's subscriber")
	}
	if settle(); !Quiet(ch) {
		t.Fatal("another agent's creation woke the subscriber")
	}
	pending(false, "another agent's workspace never answered")

	f.Create(t, s, f.Workspace("p1"))
	if !Woken(ch) {
		t.Fatal("creation did not wake the agent's subscriber")
	}
	pending(true, "never answered")

	// A refused creation (name taken) wakes nobody.
	if err := s.CreateWorkspace(ctx, f.Workspace("p1"), -1, -1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate: %v", err)
	}
	if settle(); !Quiet(ch) {
		t.Fatal("a refused creation woke the subscriber")
	}

	answered := t0.Add(time.Minute)
	answer := func(at time.Time) {
		t.Helper()
		if _, err := s.UpdateWorkspace(ctx, f.Ref("p1"), func(w workspace.Workspace) (workspace.Workspace, error) {
			w.RespondedToAgentAt = &at
			return w, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	answer(answered)
	pending(false, "answered after the desired state changed")
	if settle(); !Quiet(ch) {
		t.Fatal("an answer (desired state unchanged) woke the subscriber")
	}

	// Strictly after the answer is pending; at the same microsecond is not (docs/decisions.md).
	desire := func(st workspace.State, at time.Time) {
		t.Helper()
		if _, err := s.UpdateWorkspace(ctx, f.Ref("p1"), func(w workspace.Workspace) (workspace.Workspace, error) {
			w.DesiredState, w.DesiredStateUpdatedAt = st, at
			return w, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	desire(workspace.Running, answered)
	pending(false, "desired state changed at the time of the answer")
	if !Woken(ch) {
		t.Fatal("a change of desired_state_updated_at did not wake the subscriber")
	}
	desire(workspace.Stopped, answered.Add(time.Microsecond))
	if !Woken(ch) {
		t.Fatal("a desired-state change did not wake the subscriber")
	}
	pending(true, "desired state changed after the answer")
	if settle(); !Quiet(otherCh) {
		t.Fatal("another agent's subscriber was woken by this agent's changes")
	}

	// A refused update wakes nobody.
	refused := errors.New("refused")
	if _, err := s.UpdateWorkspace(ctx, f.Ref("p1"), func(w workspace.Workspace) (workspace.Workspace, error) {
		w.DesiredStateUpdatedAt = w.DesiredStateUpdatedAt.Add(time.Hour)
		return w, refused
	}); !errors.Is(err, refused) {
		t.Fatalf("refused update: %v", err)
	}
	if settle(); !Quiet(ch) {
		t.Fatal("a refused update woke the subscriber")
	}

	// A reconcile answers the workspace: nothing pending.
	later := answered.Add(time.Minute)
	if err := s.Reconcile(ctx, store.ReconcileScope{AgentID: f.Agent.ID}, func(_ store.ReconcileTx, rows []workspace.Workspace) ([]workspace.Workspace, error) {
		for i := range rows {
			rows[i].RespondedToAgentAt = &later
		}
		return rows, nil
	}); err != nil {
		t.Fatal(err)
	}
	pending(false, "after a reconcile answered it")

	// After cancel, nothing arrives.
	cancel()
	desire(workspace.Running, later.Add(time.Second))
	if settle(); !Quiet(ch) {
		t.Fatal("a cancelled subscription was woken")
	}
	cancel() // idempotent
}

// testNamesPerOwner: two owners may each have a workspace of one name, on one agent; each is read,
// updated and reconciled as its own (cluster names differ); one owner may not have two.
func testNamesPerOwner(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := NewFixture(t, s, "a")
	b := NewFixture(t, s, "b")
	b.Agent = a.Agent // the same cluster
	wa, wb := a.Workspace("dev"), b.Workspace("dev")
	wa.KubeName, wb.KubeName = "", "" // derived by the store
	wb.AgentID, wb.AgentName = a.Agent.ID, a.Agent.Name
	a.Create(t, s, wa)
	b.Create(t, s, wb)
	ga, err := s.Workspace(ctx, a.Ref("dev"))
	if err != nil || ga.ID != wa.ID || ga.OwnerName != a.User.Username {
		t.Fatalf("a's dev = %+v, %v", ga, err)
	}
	gb, err := s.Workspace(ctx, b.Ref("dev"))
	if err != nil || gb.ID != wb.ID {
		t.Fatalf("b's dev = %+v, %v", gb, err)
	}
	if ga.KubeName != workspace.KubeName("dev", wa.ID) || gb.KubeName != workspace.KubeName("dev", wb.ID) || ga.KubeName == gb.KubeName {
		t.Fatalf("cluster names %q and %q: want distinct, from name and id", ga.KubeName, gb.KubeName)
	}
	if _, err := s.UpdateWorkspace(ctx, b.Ref("dev"), func(w workspace.Workspace) (workspace.Workspace, error) {
		w.DesiredState = workspace.Stopped
		return w, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Workspace(ctx, a.Ref("dev")); got.DesiredState != workspace.Running {
		t.Fatalf("stopping b's dev changed a's: %s", got.DesiredState)
	}
	// An agent names them by cluster name: each report reads its own row.
	if err := s.Reconcile(ctx, store.ReconcileScope{AgentID: a.Agent.ID, Full: true, KubeNames: []string{gb.KubeName}}, func(_ store.ReconcileTx, rows []workspace.Workspace) ([]workspace.Workspace, error) {
		if len(rows) != 2 {
			t.Errorf("full reconcile read %d rows, want both dev", len(rows))
		}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	dup := a.Workspace("dev")
	dup.KubeName = ""
	if err := s.CreateWorkspace(ctx, dup, -1, -1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second dev of a: %v, want ErrConflict", err)
	}
	// A terraform workspace shares the names: a's dev is taken for it too.
	bf := NewBuildFixture(t, s, "tf")
	bf.Fixture = Fixture{User: a.User, Agent: a.Agent}
	tw := bf.TerraformWorkspace("dev")
	if err := s.CreateBuildWorkspace(ctx, tw, bf.Build(tw, 1, build.Start, t0)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a terraform dev of a beside the kubernetes one: %v, want ErrConflict", err)
	}
	list, err := s.ListWorkspaces(ctx, store.ListFilter{})
	if err != nil || len(list) != 2 || list[0].OwnerName != a.User.Username || list[1].OwnerName != b.User.Username {
		t.Fatalf("ListWorkspaces = %+v, %v; want a's dev then b's", list, err)
	}
}

// testNameFreeOnceTerminated: a name stays taken while its workspace is not Terminated (desired
// Terminated is not enough), is free once it is (both backends), and the list hides Terminated
// workspaces unless asked; a name then names the live workspace, else the latest Terminated one.
func testNameFreeOnceTerminated(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "free")
	old := f.Workspace("dev")
	old.KubeName = ""
	f.Fixture.Create(t, s, old)
	terminate := func(actual workspace.State) {
		t.Helper()
		if _, err := s.UpdateWorkspace(ctx, f.Ref("dev"), func(w workspace.Workspace) (workspace.Workspace, error) {
			w.DesiredState, w.ActualState = workspace.Terminated, actual
			return w, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	terminate(workspace.Terminating)
	again := f.Workspace("dev")
	again.KubeName = ""
	if err := s.CreateWorkspace(ctx, again, -1, -1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("dev again while the first is Terminating: %v, want ErrConflict", err)
	}
	terminate(workspace.Terminated)
	if got, err := s.Workspace(ctx, f.Ref("dev")); err != nil || got.ID != old.ID {
		t.Fatalf("dev once Terminated = %+v, %v; want the Terminated one", got, err)
	}
	again.CreatedAt = t0.Add(time.Minute)
	f.Fixture.Create(t, s, again)
	got, err := s.Workspace(ctx, f.Ref("dev"))
	if err != nil || got.ID != again.ID || got.KubeName == workspace.KubeName("dev", old.ID) {
		t.Fatalf("dev after re-creation = %+v, %v; want the new one, with its own cluster name", got, err)
	}
	if got, err := s.Workspace(ctx, store.WorkspaceRef{ID: old.ID}); err != nil || got.ActualState != workspace.Terminated {
		t.Fatalf("the old dev by id = %+v, %v", got, err)
	}
	// Terraform: a delete that succeeded frees the name as well.
	tw, _ := f.Create(t, s, "vm", t0)
	if _, err := s.UpdateWorkspace(ctx, f.Ref("vm"), func(w workspace.Workspace) (workspace.Workspace, error) {
		w.DesiredState, w.ActualState = workspace.Terminated, workspace.Terminated
		return w, nil
	}); err != nil {
		t.Fatal(err)
	}
	tw2, _ := f.Create(t, s, "vm", t0.Add(time.Minute))
	if got, _ := s.Workspace(ctx, f.Ref("vm")); got.ID != tw2.ID || tw2.ID == tw.ID {
		t.Fatalf("vm after re-creation = %+v", got)
	}
	live, err := s.ListWorkspaces(ctx, store.ListFilter{OwnerID: f.User.ID})
	if err != nil || len(live) != 2 || live[0].ID != again.ID || live[1].ID != tw2.ID {
		t.Fatalf("ListWorkspaces = %+v, %v; want the two live ones", live, err)
	}
	all, err := s.ListWorkspaces(ctx, store.ListFilter{OwnerID: f.User.ID, Terminated: true})
	if err != nil || len(all) != 4 || all[0].ID != again.ID || all[1].ID != old.ID {
		t.Fatalf("ListWorkspaces(Terminated) = %+v, %v; want four, newest first within a name", all, err)
	}
}
