package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

func (t reconcileTx) SetStartupSteps(workspaceID string, steps []workspace.StartupStep) error {
	for _, st := range steps {
		if _, err := t.s.upsertStep(t.ctx, t.q, workspaceID, st); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) SetWorkspaceStartupStep(ctx context.Context, workspaceID string, st workspace.StartupStep) error {
	n, err := s.upsertStep(ctx, s.db, workspaceID, st)
	if err == nil && n == 0 {
		err = fmt.Errorf("record startup step %s of workspace %s: %w", st.Name, workspaceID, store.ErrNotFound)
	}
	return err
}

// upsertStep writes one step of a workspace that exists (the rows written: 0 when it does not).
// An empty log keeps the stored one of the same run (same started_at, both set).
func (s *Store) upsertStep(ctx context.Context, q querier, workspaceID string, st workspace.StartupStep) (int64, error) {
	res, err := q.ExecContext(ctx, s.q(`INSERT INTO workspace_startup_steps
		(workspace_id, name, position, state, started_at, ended_at, detail, log, updated_at)
		SELECT id, ?, ?, ?, ?, ?, ?, ?, ? FROM workspaces WHERE id = ?
		ON CONFLICT (workspace_id, name) DO UPDATE SET position = excluded.position, state = excluded.state,
			started_at = excluded.started_at, ended_at = excluded.ended_at, detail = excluded.detail,
			log = CASE WHEN excluded.log = '' AND excluded.started_at IS NOT NULL
				AND workspace_startup_steps.started_at = excluded.started_at
				THEN workspace_startup_steps.log ELSE excluded.log END,
			updated_at = excluded.updated_at`),
		st.Name, st.Position, st.State, nullMicros(st.StartedAt), nullMicros(st.EndedAt), st.Detail, st.Log, micros(st.UpdatedAt), workspaceID)
	if err != nil {
		return 0, fmt.Errorf("record startup step %s of workspace %s: %w", st.Name, workspaceID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("record startup step %s of workspace %s: %w", st.Name, workspaceID, err)
	}
	return n, nil
}

func (s *Store) WorkspaceStartupSteps(ctx context.Context, workspaceID string) ([]workspace.StartupStep, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT name, position, state, started_at, ended_at, detail, log, updated_at
		FROM workspace_startup_steps WHERE workspace_id = ? ORDER BY position, name`), workspaceID)
	if err != nil {
		return nil, fmt.Errorf("read the startup steps of workspace %s: %w", workspaceID, err)
	}
	defer rows.Close()
	steps := []workspace.StartupStep{}
	for rows.Next() {
		var st workspace.StartupStep
		var started, ended sql.NullInt64
		var at int64
		if err := rows.Scan(&st.Name, &st.Position, &st.State, &started, &ended, &st.Detail, &st.Log, &at); err != nil {
			return nil, fmt.Errorf("read the startup steps of workspace %s: %w", workspaceID, err)
		}
		st.StartedAt, st.EndedAt, st.UpdatedAt = ptrTime(started), ptrTime(ended), fromMicros(at)
		steps = append(steps, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the startup steps of workspace %s: %w", workspaceID, err)
	}
	return steps, nil
}
