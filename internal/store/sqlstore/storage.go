package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
)

// The builds of an owner's workspaces whose state and log the state rules no longer need: every
// build of a deleted workspace (actual Terminated: its delete succeeded), and every build but the
// latest of the others.
const olderBuildsOf = `SELECT b.id FROM workspace_builds b JOIN workspaces w ON w.id = b.workspace_id
	WHERE w.owner_id = ? AND (w.actual_state = 'Terminated'
		OR b.build_number < (SELECT MAX(l.build_number) FROM workspace_builds l WHERE l.workspace_id = b.workspace_id))`

func (s *Store) StorageUsage(ctx context.Context, ownerID string) (store.StorageUsage, error) {
	return s.storageUsage(ctx, s.db, ownerID)
}

func (s *Store) storageUsage(ctx context.Context, db querier, ownerID string) (store.StorageUsage, error) {
	return s.usageWhere(ctx, db, "w.owner_id = ?", ownerID)
}

func (s *Store) LatestStateBytes(ctx context.Context, workspaceID string) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT COALESCE(octet_length(state), 0) FROM workspace_builds WHERE workspace_id = ?
		ORDER BY build_number DESC LIMIT 1`), workspaceID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("the state bytes of workspace %s: %w", workspaceID, err)
	}
	return n, nil
}

// workspaceUsage is what the builds of one workspace keep.
func (s *Store) workspaceUsage(ctx context.Context, db querier, workspaceID string) (store.StorageUsage, error) {
	return s.usageWhere(ctx, db, "w.id = ?", workspaceID)
}

// usageWhere sums the state and log bytes of the builds of the workspaces w that cond (with its
// one argument arg) selects.
func (s *Store) usageWhere(ctx context.Context, db querier, cond, arg string) (store.StorageUsage, error) {
	var u store.StorageUsage
	// octet_length counts bytes on both engines (SQLite's length counts characters of text).
	if err := db.QueryRowContext(ctx, s.q(`SELECT COALESCE(SUM(octet_length(b.state)), 0) FROM workspace_builds b
		JOIN workspaces w ON w.id = b.workspace_id WHERE `+cond+` AND b.state IS NOT NULL`), arg).Scan(&u.StateBytes); err != nil {
		return u, fmt.Errorf("the state bytes of %s: %w", arg, err)
	}
	if err := db.QueryRowContext(ctx, s.q(`SELECT COALESCE(SUM(octet_length(g.output)), 0) FROM provisioner_job_logs g
		JOIN provisioner_jobs j ON j.id = g.job_id JOIN workspace_builds b ON b.id = j.build_id
		JOIN workspaces w ON w.id = b.workspace_id WHERE `+cond), arg).Scan(&u.LogBytes); err != nil {
		return u, fmt.Errorf("the log bytes of %s: %w", arg, err)
	}
	return u, nil
}

func (s *Store) PruneStorage(ctx context.Context, ownerID string, now time.Time, note string) (store.StorageUsage, error) {
	var u store.StorageUsage
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE workspace_builds SET state = NULL, state_pruned = ?
			WHERE state IS NOT NULL AND id IN (`+olderBuildsOf+`)`), true, ownerID); err != nil {
			return fmt.Errorf("prune the older states of %s: %w", ownerID, err)
		}
		rows, err := tx.QueryContext(ctx, s.q(`SELECT j.id FROM provisioner_jobs j WHERE j.completed_at IS NOT NULL
			AND j.build_id IN (`+olderBuildsOf+`) AND EXISTS (SELECT 1 FROM provisioner_job_logs g WHERE g.job_id = j.id AND g.output <> ?)`), ownerID, note)
		if err != nil {
			return fmt.Errorf("list the older logs of %s: %w", ownerID, err)
		}
		var jobs []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			jobs = append(jobs, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, id := range jobs {
			if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM provisioner_job_logs WHERE job_id = ?`), id); err != nil {
				return fmt.Errorf("prune the log of job %s: %w", id, err)
			}
			if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO provisioner_job_logs (job_id, created_at, stage, level, output) VALUES (?, ?, ?, ?, ?)`),
				id, micros(now), "Storage", "warn", note); err != nil {
				return fmt.Errorf("note the pruned log of job %s: %w", id, err)
			}
			if _, err := tx.ExecContext(ctx, s.q(`UPDATE provisioner_jobs SET log_lines = 1 WHERE id = ?`), id); err != nil {
				return fmt.Errorf("count the log lines of job %s: %w", id, err)
			}
		}
		u, err = s.storageUsage(ctx, tx, ownerID)
		return err
	})
	return u, err
}
