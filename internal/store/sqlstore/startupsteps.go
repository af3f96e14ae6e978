package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/hangar-dev/hangar/internal/workspace"
)

func (t reconcileTx) SetStartupSteps(workspaceID string, steps []workspace.StartupStep) error {
	for _, st := range steps {
		// An empty log keeps the stored one of the same run (same started_at, both set).
		_, err := t.q.ExecContext(t.ctx, t.s.q(`INSERT INTO workspace_startup_steps
			(workspace_id, name, position, state, started_at, ended_at, detail, log, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (workspace_id, name) DO UPDATE SET position = excluded.position, state = excluded.state,
				started_at = excluded.started_at, ended_at = excluded.ended_at, detail = excluded.detail,
				log = CASE WHEN excluded.log = '' AND excluded.started_at IS NOT NULL
					AND workspace_startup_steps.started_at = excluded.started_at
					THEN workspace_startup_steps.log ELSE excluded.log END,
				updated_at = excluded.updated_at`),
			workspaceID, st.Name, st.Position, st.State, nullMicros(st.StartedAt), nullMicros(st.EndedAt), st.Detail, st.Log, micros(st.UpdatedAt))
		if err != nil {
			return fmt.Errorf("record startup step %s of workspace %s: %w", st.Name, workspaceID, err)
		}
	}
	return nil
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
