package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
)

func (s *Store) CreateWorkspaceAgentToken(ctx context.Context, t store.WorkspaceAgentToken) error {
	// Inserted only when the workspace exists, so that an unknown one is ErrNotFound on both
	// engines rather than a foreign key error of each.
	res, err := s.db.ExecContext(ctx, s.q(`INSERT INTO workspace_agent_tokens (token_hash, workspace_id, build_number, created_at)
		SELECT ?, id, ?, ? FROM workspaces WHERE id = ?`), t.Hash, t.BuildNumber, micros(t.CreatedAt), t.WorkspaceID)
	if err = s.wrapUnique(err, "workspace agent token"); err != nil {
		return fmt.Errorf("create workspace agent token: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("create workspace agent token: %w", err)
	} else if n == 0 {
		return fmt.Errorf("create workspace agent token: workspace %s: %w", t.WorkspaceID, store.ErrNotFound)
	}
	return nil
}

func (s *Store) WorkspaceAgentTokenByHash(ctx context.Context, hash []byte) (store.WorkspaceAgentToken, error) {
	t := store.WorkspaceAgentToken{}
	var created int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT token_hash, workspace_id, build_number, created_at FROM workspace_agent_tokens WHERE token_hash = ?`), hash).
		Scan(&t.Hash, &t.WorkspaceID, &t.BuildNumber, &created)
	if err != nil {
		return store.WorkspaceAgentToken{}, notFound(err, "workspace agent token")
	}
	t.CreatedAt = fromMicros(created)
	return t, nil
}

func (s *Store) KeepWorkspaceAgentTokens(ctx context.Context, workspaceID string, upToBuild int, keep [][]byte) (int, error) {
	removed := 0
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		removed = 0
		rows, err := tx.QueryContext(ctx, s.q(`SELECT token_hash FROM workspace_agent_tokens WHERE workspace_id = ? AND build_number <= ?`), workspaceID, upToBuild)
		if err != nil {
			return fmt.Errorf("read workspace agent tokens: %w", err)
		}
		var drop [][]byte
		for rows.Next() {
			var h []byte
			if err := rows.Scan(&h); err != nil {
				rows.Close()
				return fmt.Errorf("read workspace agent tokens: %w", err)
			}
			kept := false
			for _, k := range keep {
				kept = kept || bytes.Equal(k, h)
			}
			if !kept {
				drop = append(drop, h)
			}
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("read workspace agent tokens: %w", err)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read workspace agent tokens: %w", err)
		}
		for _, h := range drop {
			if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM workspace_agent_tokens WHERE token_hash = ?`), h); err != nil {
				return fmt.Errorf("remove a workspace agent token: %w", err)
			}
			removed++
		}
		return nil
	})
	return removed, err
}

func (s *Store) RecordWorkspaceActivity(ctx context.Context, workspaceID string, at time.Time) error {
	var id string
	err := s.db.QueryRowContext(ctx, s.q(`SELECT id FROM workspaces WHERE id = ?`), workspaceID).Scan(&id)
	if err != nil {
		return notFound(err, "workspace "+workspaceID)
	}
	// Only a later time is written: activity never moves back.
	if _, err := s.db.ExecContext(ctx, s.q(`UPDATE workspaces SET last_activity_at = ? WHERE id = ? AND (last_activity_at IS NULL OR last_activity_at < ?)`),
		micros(at), workspaceID, micros(at)); err != nil {
		return fmt.Errorf("record activity of workspace %s: %w", workspaceID, err)
	}
	return nil
}

func (s *Store) SetWorkspaceAgentConnection(ctx context.Context, c store.AgentConnection) error {
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO workspace_agent_connections (workspace_id, replica, relay_url, connected_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (workspace_id) DO UPDATE SET replica = excluded.replica, relay_url = excluded.relay_url, connected_at = excluded.connected_at`),
		c.WorkspaceID, c.Replica, c.RelayURL, micros(c.ConnectedAt))
	if err != nil {
		return fmt.Errorf("record the helper connection of workspace %s: %w", c.WorkspaceID, err)
	}
	return nil
}

func (s *Store) ClearWorkspaceAgentConnection(ctx context.Context, c store.AgentConnection) error {
	if _, err := s.db.ExecContext(ctx, s.q(`DELETE FROM workspace_agent_connections WHERE workspace_id = ? AND replica = ? AND connected_at = ?`),
		c.WorkspaceID, c.Replica, micros(c.ConnectedAt)); err != nil {
		return fmt.Errorf("clear the helper connection of workspace %s: %w", c.WorkspaceID, err)
	}
	return nil
}

func (s *Store) WorkspaceAgentConnection(ctx context.Context, workspaceID string) (store.AgentConnection, error) {
	c := store.AgentConnection{WorkspaceID: workspaceID}
	var at int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT replica, relay_url, connected_at FROM workspace_agent_connections WHERE workspace_id = ?`), workspaceID).
		Scan(&c.Replica, &c.RelayURL, &at)
	if err != nil {
		return store.AgentConnection{}, notFound(err, "helper connection of workspace "+workspaceID)
	}
	c.ConnectedAt = fromMicros(at)
	return c, nil
}

func (s *Store) RecordWorkspaceHelperDisconnect(ctx context.Context, workspaceID string, at time.Time, why string) error {
	// Only for a workspace that exists: ErrNotFound on both engines rather than a foreign key error.
	res, err := s.db.ExecContext(ctx, s.q(`INSERT INTO workspace_helper_status (workspace_id, disconnected_at, last_error)
		SELECT id, ?, ? FROM workspaces WHERE id = ?
		ON CONFLICT (workspace_id) DO UPDATE SET disconnected_at = excluded.disconnected_at, last_error = excluded.last_error`),
		micros(at), why, workspaceID)
	if err != nil {
		return fmt.Errorf("record the end of the helper connection of workspace %s: %w", workspaceID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("record the end of the helper connection of workspace %s: %w", workspaceID, store.ErrNotFound)
	}
	return nil
}
