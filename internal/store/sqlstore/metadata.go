package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

func (s *Store) SetWorkspaceMetadata(ctx context.Context, workspaceID string, report []byte, at time.Time) error {
	res, err := s.db.ExecContext(ctx, s.q(`INSERT INTO workspace_metadata (workspace_id, report, reported_at)
		SELECT id, ?, ? FROM workspaces WHERE id = ?
		ON CONFLICT (workspace_id) DO UPDATE SET report = excluded.report, reported_at = excluded.reported_at`),
		string(report), micros(at), workspaceID)
	if err == nil {
		var n int64
		if n, err = res.RowsAffected(); err == nil && n == 0 {
			err = store.ErrNotFound
		}
	}
	if err != nil {
		return fmt.Errorf("keep the metadata of workspace %s: %w", workspaceID, err)
	}
	return nil
}

func (s *Store) WorkspaceMetadata(ctx context.Context, workspaceID string) ([]byte, time.Time, error) {
	var report string
	var at int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT report, reported_at FROM workspace_metadata WHERE workspace_id = ?`), workspaceID).Scan(&report, &at)
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read the metadata of workspace %s: %w", workspaceID, err)
	}
	return []byte(report), fromMicros(at), nil
}

func (s *Store) RecordWorkspaceAlert(ctx context.Context, workspaceID string, a workspace.Alert) (wrote bool, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("record the %s alert of workspace %s: %w", a.Kind, workspaceID, err)
		}
	}()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	var exists int
	if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM workspaces WHERE id = ?`), workspaceID).Scan(&exists); err != nil {
		return false, err
	}
	if exists == 0 {
		return false, store.ErrNotFound
	}
	dup := `SELECT COUNT(*) FROM workspace_alerts WHERE workspace_id = ? AND kind = ? AND subject = ? AND cleared_at IS NULL`
	args := []any{workspaceID, a.Kind, a.Subject}
	if a.ClearedAt != nil {
		dup = `SELECT COUNT(*) FROM workspace_alerts WHERE workspace_id = ? AND kind = ? AND subject = ? AND raised_at = ?`
		args = append(args, micros(a.RaisedAt))
	}
	var n int
	if err := tx.QueryRowContext(ctx, s.q(dup), args...).Scan(&n); err != nil {
		return false, err
	}
	if n > 0 {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO workspace_alerts (workspace_id, kind, subject, detail, raised_at, cleared_at)
		VALUES (?, ?, ?, ?, ?, ?)`), workspaceID, a.Kind, a.Subject, a.Detail, micros(a.RaisedAt), nullMicros(a.ClearedAt)); err != nil {
		return false, err
	}
	// The oldest cleared alerts beyond the bound go.
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM workspace_alerts WHERE workspace_id = ? AND cleared_at IS NOT NULL AND id NOT IN
		(SELECT id FROM workspace_alerts WHERE workspace_id = ? ORDER BY raised_at DESC, id DESC LIMIT ?)`),
		workspaceID, workspaceID, workspace.MaxAlertsKept); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

func (s *Store) ClearWorkspaceAlert(ctx context.Context, workspaceID, kind, subject string, at time.Time) error {
	if _, err := s.db.ExecContext(ctx, s.q(`UPDATE workspace_alerts SET cleared_at = ?
		WHERE workspace_id = ? AND kind = ? AND subject = ? AND cleared_at IS NULL`), micros(at), workspaceID, kind, subject); err != nil {
		return fmt.Errorf("clear the %s alert of workspace %s: %w", kind, workspaceID, err)
	}
	return nil
}

func (s *Store) WorkspaceAlerts(ctx context.Context, workspaceID string) ([]workspace.Alert, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT id, kind, subject, detail, raised_at, cleared_at FROM workspace_alerts
		WHERE workspace_id = ? ORDER BY raised_at DESC, id DESC`), workspaceID)
	if err != nil {
		return nil, fmt.Errorf("read the alerts of workspace %s: %w", workspaceID, err)
	}
	defer rows.Close()
	out := []workspace.Alert{}
	for rows.Next() {
		var a workspace.Alert
		var raised int64
		var cleared sql.NullInt64
		if err := rows.Scan(&a.ID, &a.Kind, &a.Subject, &a.Detail, &raised, &cleared); err != nil {
			return nil, fmt.Errorf("read the alerts of workspace %s: %w", workspaceID, err)
		}
		a.RaisedAt, a.ClearedAt = fromMicros(raised), ptrTime(cleared)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the alerts of workspace %s: %w", workspaceID, err)
	}
	return out, nil
}
