package sqlstore

import (
	"context"
	"fmt"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

func (s *Store) SetWorkspaceDotfiles(ctx context.Context, workspaceID string, d workspace.DotfilesStatus) error {
	// Only for a workspace that exists: ErrNotFound on both engines rather than a foreign key error.
	res, err := s.db.ExecContext(ctx, s.q(`INSERT INTO workspace_dotfiles (workspace_id, state, repository, script, error, log, updated_at)
		SELECT id, ?, ?, ?, ?, ?, ? FROM workspaces WHERE id = ?
		ON CONFLICT (workspace_id) DO UPDATE SET state = excluded.state, repository = excluded.repository, script = excluded.script,
			error = excluded.error, log = excluded.log, updated_at = excluded.updated_at`),
		d.State, d.Repository, d.Script, d.Error, d.Log, micros(d.UpdatedAt), workspaceID)
	if err != nil {
		return fmt.Errorf("record the dotfiles of workspace %s: %w", workspaceID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("record the dotfiles of workspace %s: %w", workspaceID, store.ErrNotFound)
	}
	return nil
}

func (s *Store) WorkspaceDotfiles(ctx context.Context, workspaceID string) (workspace.DotfilesStatus, error) {
	var d workspace.DotfilesStatus
	var at int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT state, repository, script, error, log, updated_at FROM workspace_dotfiles WHERE workspace_id = ?`), workspaceID).
		Scan(&d.State, &d.Repository, &d.Script, &d.Error, &d.Log, &at)
	if err != nil {
		return d, notFound(err, "dotfiles of workspace "+workspaceID)
	}
	d.UpdatedAt = fromMicros(at)
	return d, nil
}
