package storetest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/google/uuid"

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
	stmts := []struct {
		q    string
		args []any
	}{
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
	for _, st := range stmts {
		if _, err := db.ExecContext(ctx, d.Rebind(st.q), st.args...); err != nil {
			t.Fatalf("write a version 1 row: %v", err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := open(t)
	w, err := s.WorkspaceByName(ctx, "answered")
	if err != nil {
		t.Fatal(err)
	}
	if w.ID != answeredID || w.OwnerID != userID || w.OwnerName != "old-user" || w.AgentID != agentID || w.AgentName != "old-agent" ||
		w.Namespace != "hangar-answered" || w.DesiredState != workspace.Stopped || w.ActualState != workspace.Error ||
		!w.DesiredStateUpdatedAt.Equal(t0) || w.ActualStateUpdatedAt == nil || !w.ActualStateUpdatedAt.Equal(responded) ||
		w.RespondedToAgentAt == nil || !w.RespondedToAgentAt.Equal(responded) || w.DeploymentResourceVersion == nil ||
		*w.DeploymentResourceVersion != "17" || w.ErrorType != "applier" || w.ErrorMessage != "boom" || w.URL != "https://answered.example.com/" ||
		!w.CreatedAt.Equal(t0) || w.Backend != store.KindKubernetes || w.TemplateID != "" {
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
	if err := s.Reconcile(ctx, store.ReconcileScope{AgentID: agentID}, func(rows []store.Workspace) ([]store.Workspace, error) {
		if n := names(rows); len(n) != 1 || !n["never"] {
			t.Errorf("partial reconcile after the upgrade read %v, want never", n)
		}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	db2 := s.(interface{ DB() *sql.DB }).DB()
	indexes := `SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'workspaces' AND name IN ('workspaces_agent_id', 'workspaces_owner_id', 'workspaces_pending')`
	if d.Name == "postgres" {
		indexes = `SELECT COUNT(*) FROM pg_indexes WHERE tablename = 'workspaces' AND indexname IN ('workspaces_agent_id', 'workspaces_owner_id', 'workspaces_pending')`
	}
	var n int
	if err := db2.QueryRowContext(ctx, indexes).Scan(&n); err != nil || n != 3 {
		t.Fatalf("workspaces indexes after the upgrade: %d of 3, %v", n, err)
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
	if list, err := s.ListWorkspaces(ctx, ""); err != nil || len(list) != 3 {
		t.Fatalf("ListWorkspaces after the upgrade = %d, %v; want 3", len(list), err)
	}
}
