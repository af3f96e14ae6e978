package storetest

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlstore"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// UpgradeFromV1 migrates db (empty) to schema version 1 only, writes a user, an agent and two
// workspaces the way that version stored them, closes db, then opens the store through open (which
// migrates to the latest version) and checks that the rows survived whole, that the indexes are
// there, and that the new schema takes terraform workspaces.
func UpgradeFromV1(t *testing.T, db *sql.DB, d sqlstore.Dialect, open func(t *testing.T) store.Store) {
	ctx := context.Background()
	if err := sqlstore.MigrateTo(ctx, db, d, 1); err != nil {
		t.Fatal(err)
	}
	userID, agentID, answeredID, neverID := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
	responded := t0.Add(time.Minute)
	stmts := []rawRow{
		{`INSERT INTO users (id, username, admin, token_hash, created_at) VALUES (?, ?, ?, ?, ?)`,
			[]any{userID, "old-user", true, []byte("old-user-hash"), t0.UnixMicro()}},
		{`INSERT INTO agents (id, name, token_hash, config, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
			[]any{agentID, "old-agent", []byte("old-agent-hash"), `{"dns_zone":"old.example.com"}`, t0.UnixMicro(), t0.UnixMicro()}},
		{`INSERT INTO workspaces (id, name, owner_id, agent_id, namespace, devfile, desired_state, actual_state, desired_state_updated_at,
			actual_state_updated_at, responded_to_agent_at, deployment_resource_version, error_type, error_message, url, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			[]any{answeredID, "answered", userID, agentID, "hangar-answered", "schemaVersion: 2.2.0", "Stopped", "Error", t0.UnixMicro(),
				responded.UnixMicro(), responded.UnixMicro(), "17", "applier", "boom", "https://answered.example.com/", t0.UnixMicro()}},
		{`INSERT INTO workspaces (id, name, owner_id, agent_id, namespace, devfile, desired_state, actual_state, desired_state_updated_at,
			created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			[]any{neverID, "never", userID, agentID, "hangar-never", "schemaVersion: 2.3.0", "Running", "CreationRequested", t0.UnixMicro(), t0.UnixMicro()}},
	}
	writeRows(t, db, d, 1, stmts)

	s := open(t)
	w, err := s.Workspace(ctx, store.WorkspaceRef{OwnerID: userID, Name: "answered"})
	if err != nil {
		t.Fatal(err)
	}
	if w.ID != answeredID || w.OwnerID != userID || w.OwnerName != "old-user" || w.AgentID != agentID || w.AgentName != "old-agent" ||
		w.Namespace != "hangar-answered" || w.DesiredState != workspace.Stopped || w.ActualState != workspace.Error ||
		!w.DesiredStateUpdatedAt.Equal(t0) || w.ActualStateUpdatedAt == nil || !w.ActualStateUpdatedAt.Equal(responded) ||
		w.RespondedToAgentAt == nil || !w.RespondedToAgentAt.Equal(responded) || w.DeploymentResourceVersion == nil ||
		*w.DeploymentResourceVersion != "17" || w.ErrorType != "applier" || w.ErrorMessage != "boom" ||
		w.URL != "https://answered--old-user.example.com/" || w.KubeName != "answered" ||
		!w.CreatedAt.Equal(t0) || w.Backend != workspace.KindKubernetes || w.TemplateID != "" {
		t.Fatalf("a version 1 workspace after the upgrade: %+v", w)
	}
	if text, err := s.WorkspaceDevfile(ctx, neverID); err != nil || text != "schemaVersion: 2.3.0" {
		t.Fatalf("devfile after the upgrade: %q, %v", text, err)
	}
	if u, err := s.UserByUsername(ctx, "old-user"); err != nil || u.ID != userID || !u.Admin {
		t.Fatalf("user after the upgrade: %+v, %v", u, err)
	}
	// The partial index and the reconcile scopes work as before.
	if p, err := s.HasPending(ctx, agentID); err != nil || !p {
		t.Fatalf("HasPending after the upgrade = %v, %v; want true (never answered)", p, err)
	}
	if err := s.Reconcile(ctx, store.ReconcileScope{AgentID: agentID, KubeNames: []string{"answered"}}, func(_ store.ReconcileTx, rows []workspace.Workspace) ([]workspace.Workspace, error) {
		if n := names(rows); len(n) != 2 || !n["never"] || !n["answered"] {
			t.Errorf("partial reconcile after the upgrade read %v, want never, and answered by its cluster name", n)
		}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	db2 := s.(interface{ DB() *sql.DB }).DB()
	indexes := `SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'workspaces' AND name IN ('workspaces_agent_id', 'workspaces_owner_id', 'workspaces_pending', 'workspaces_owner_name')`
	if d.Name == "postgres" {
		indexes = `SELECT COUNT(*) FROM pg_indexes WHERE tablename = 'workspaces' AND indexname IN ('workspaces_agent_id', 'workspaces_owner_id', 'workspaces_pending', 'workspaces_owner_name')`
	}
	var n int
	if err := db2.QueryRowContext(ctx, indexes).Scan(&n); err != nil || n != 4 {
		t.Fatalf("workspaces indexes after the upgrade: %d of 4, %v", n, err)
	}
	if d.Name == "sqlite" {
		rows, err := db2.QueryContext(ctx, `PRAGMA foreign_key_check`)
		if err != nil {
			t.Fatal(err)
		}
		bad := rows.Next()
		rows.Close()
		if bad {
			t.Fatal("foreign key violations after the upgrade")
		}
	}
	// The new schema: a terraform workspace (no agent) alongside.
	f := NewBuildFixture(t, s, "up")
	f.Create(t, s, "tf-after-upgrade", t0)
	if list, err := s.ListWorkspaces(ctx, store.ListFilter{}); err != nil || len(list) != 3 {
		t.Fatalf("ListWorkspaces after the upgrade = %d, %v; want 3", len(list), err)
	}
	// Names are now per owner: another user may have "answered" too.
	other := NewFixture(t, s, "other")
	mine := other.Workspace("answered")
	mine.KubeName = ""
	other.Create(t, s, mine)
	if got, err := s.Workspace(ctx, other.Ref("answered")); err != nil || got.ID != mine.ID || got.KubeName == "answered" {
		t.Fatalf("another owner's answered after the upgrade = %+v, %v", got, err)
	}
}

// UpgradeFromV2 migrates db (empty) to schema version 2, writes users (one whose username holds
// "--", as older versions allowed), a kubernetes workspace, and a terraform workspace with a build
// and its job and log (rows that reference workspaces, which SQLite's migration 3 rebuilds), then
// opens the store through open and checks: every row kept, cluster names equal to names, URLs in
// the new scheme or none, no foreign key broken, and the names per owner.
func UpgradeFromV2(t *testing.T, db *sql.DB, d sqlstore.Dialect, open func(t *testing.T) store.Store) {
	ctx := context.Background()
	if err := sqlstore.MigrateTo(ctx, db, d, 2); err != nil {
		t.Fatal(err)
	}
	alice, dashed, agentID, tmplID, verID := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
	kID, dashedWS, tfID, buildID, jobID := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
	us := t0.UnixMicro()
	stmts := []rawRow{
		{`INSERT INTO users (id, username, admin, token_hash, created_at) VALUES (?, ?, ?, ?, ?)`, []any{alice, "alice", false, []byte("h-alice"), us}},
		{`INSERT INTO users (id, username, admin, token_hash, created_at) VALUES (?, ?, ?, ?, ?)`, []any{dashed, "b--c", false, []byte("h-dashed"), us}},
		{`INSERT INTO agents (id, name, token_hash, config, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
			[]any{agentID, "k", []byte("h-agent"), `{"dns_zone":"ws.example.com"}`, us, us}},
		{`INSERT INTO workspaces (id, name, owner_id, agent_id, namespace, devfile, desired_state, actual_state, desired_state_updated_at,
			url, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			[]any{kID, "dev", alice, agentID, "hangar-dev", "schemaVersion: 2.2.0", "Running", "Running", us, "https://3000-dev.ws.example.com/app", us}},
		{`INSERT INTO workspaces (id, name, owner_id, agent_id, namespace, devfile, desired_state, actual_state, desired_state_updated_at,
			url, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			[]any{dashedWS, "x", dashed, agentID, "shared", "schemaVersion: 2.2.0", "Stopped", "Stopped", us, "https://3000-x.ws.example.com/", us}},
		{`INSERT INTO templates (id, name, kind, active_version_id, created_by, created_at, updated_at) VALUES (?, ?, ?, NULL, ?, ?, ?)`,
			[]any{tmplID, "vm", "terraform", "alice", us, us}},
		{`INSERT INTO template_versions (id, template_id, number, archive, hash, created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			[]any{verID, tmplID, 1, []byte("module"), "h", "alice", us}},
		{`UPDATE templates SET active_version_id = ? WHERE id = ?`, []any{verID, tmplID}},
		{`INSERT INTO workspaces (id, name, owner_id, agent_id, namespace, devfile, desired_state, actual_state, desired_state_updated_at,
			created_at, backend, template_id) VALUES (?, ?, ?, NULL, '', '', ?, ?, ?, ?, 'terraform', ?)`,
			[]any{tfID, "vm1", alice, "Terminated", "Terminated", us, us, tmplID}},
		{`INSERT INTO workspace_builds (id, workspace_id, build_number, transition, reason, initiator_id, template_version_id, state_source, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, []any{buildID, tfID, 1, "delete", "initiator", alice, verID, "none", us}},
		{`INSERT INTO provisioner_jobs (id, build_id, created_at, completed_at) VALUES (?, ?, ?, ?)`, []any{jobID, buildID, us, us}},
		{`INSERT INTO provisioner_job_logs (job_id, created_at, stage, level, output) VALUES (?, ?, ?, ?, ?)`, []any{jobID, us, "destroy", "info", "gone"}},
	}
	writeRows(t, db, d, 2, stmts)

	s := open(t)
	dev, err := s.Workspace(ctx, store.WorkspaceRef{OwnerID: alice, Name: "dev"})
	if err != nil || dev.ID != kID || dev.KubeName != "dev" || dev.Namespace != "hangar-dev" || dev.URL != "https://3000-dev--alice.ws.example.com/app" ||
		dev.LastActivityAt != nil {
		t.Fatalf("alice's dev after the upgrade = %+v, %v; want cluster name dev, namespace hangar-dev, URL in the new scheme, never used", dev, err)
	}
	if n, err := s.RecordActivity(ctx, agentID, []store.Activity{{WorkspaceID: kID, At: t0.Add(time.Hour)}}); err != nil || n != 1 {
		t.Fatalf("RecordActivity after the upgrade = %d, %v", n, err)
	}
	if used, err := s.Workspace(ctx, store.WorkspaceRef{ID: kID}); err != nil || used.LastActivityAt == nil || !used.LastActivityAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("alice's dev after an activity report = %+v, %v", used, err)
	}
	x, err := s.Workspace(ctx, store.WorkspaceRef{OwnerID: dashed, Name: "x"})
	if err != nil || x.KubeName != "x" || x.URL != "" {
		t.Fatalf("b--c's x after the upgrade = %+v, %v; want no URL (its owner's name holds the separator)", x, err)
	}
	vm, err := s.Workspace(ctx, store.WorkspaceRef{ID: tfID})
	if err != nil || vm.Backend != workspace.KindTerraform || vm.TemplateName != "vm" || vm.KubeName != "vm1" ||
		vm.TemplateVersionID != verID || vm.TemplateVersion != 1 || vm.TemplateActiveVersionID != verID {
		t.Fatalf("terraform workspace after the upgrade = %+v, %v", vm, err)
	}
	if b, err := s.BuildByNumber(ctx, tfID, 1); err != nil || b.ID != buildID || b.Job.ID != jobID {
		t.Fatalf("its build after the upgrade = %+v, %v", b, err)
	}
	if lines, err := s.JobLogs(ctx, jobID, 0, 10); err != nil || len(lines) != 1 || lines[0].Output != "gone" {
		t.Fatalf("its log after the upgrade = %+v, %v", lines, err)
	}
	db2 := s.(interface{ DB() *sql.DB }).DB()
	if d.Name == "sqlite" {
		rows, err := db2.QueryContext(ctx, `PRAGMA foreign_key_check`)
		if err != nil {
			t.Fatal(err)
		}
		bad := rows.Next()
		rows.Close()
		if bad {
			t.Fatal("foreign key violations after the upgrade")
		}
	}
	// vm1 is Terminated: alice may use the name again; she may not have two dev.
	again := workspace.Workspace{ID: uuid.NewString(), Name: "vm1", OwnerID: alice, DesiredState: workspace.Running, ActualState: workspace.Starting,
		DesiredStateUpdatedAt: t0, CreatedAt: t0, Backend: workspace.KindTerraform, TemplateID: tmplID}
	b := build.Build{ID: uuid.NewString(), WorkspaceID: again.ID, Number: 1, Transition: build.Start, Reason: build.ReasonInitiator, InitiatorID: alice,
		TemplateVersionID: verID, StateSource: build.SourceNone, CreatedAt: t0}
	b.Job = build.Job{ID: uuid.NewString(), BuildID: b.ID, CreatedAt: t0}
	if err := s.CreateBuildWorkspace(ctx, again, b); err != nil {
		t.Fatalf("vm1 again after its Terminated namesake: %v", err)
	}
	twice := workspace.Workspace{ID: uuid.NewString(), Name: "dev", OwnerID: alice, AgentID: agentID, Namespace: "hangar-x", Devfile: "schemaVersion: 2.2.0",
		DesiredState: workspace.Running, ActualState: workspace.CreationRequested, DesiredStateUpdatedAt: t0, CreatedAt: t0}
	if err := s.CreateWorkspace(ctx, twice, -1, -1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second dev of alice after the upgrade: %v, want ErrConflict", err)
	}
}

// rawRow is a statement (with ? placeholders) that writes a row the way an older schema stored it.
type rawRow struct {
	q    string
	args []any
}

// writeRows writes rows into db at schema version (as migrated to by MigrateTo), then closes db so
// that the store opened next migrates it on.
func writeRows(t *testing.T, db *sql.DB, d sqlstore.Dialect, version int, rows []rawRow) {
	t.Helper()
	for _, st := range rows {
		if _, err := db.ExecContext(context.Background(), d.Rebind(st.q), st.args...); err != nil {
			t.Fatalf("write a version %d row: %v\n%s", version, err, st.q)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
