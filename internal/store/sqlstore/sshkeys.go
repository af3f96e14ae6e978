package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

const sshKeyCols = `id, user_id, name, fingerprint, public_key, created_at`

func scanSSHKey(row scanner, extra ...any) (store.SSHKey, error) {
	var k store.SSHKey
	var created int64
	if err := row.Scan(append([]any{&k.ID, &k.UserID, &k.Name, &k.Fingerprint, &k.PublicKey, &created}, extra...)...); err != nil {
		return k, err
	}
	k.CreatedAt = fromMicros(created)
	return k, nil
}

func (s *Store) CreateSSHKey(ctx context.Context, k store.SSHKey, maxPerUser int) error {
	return s.actionTx(ctx, func(tx *sql.Tx) error {
		// Lock the user's row so that two additions cannot both pass the count (Postgres); SQLite's
		// transaction already holds the write lock.
		if s.d.ForUpdate != "" {
			var id string
			if err := tx.QueryRowContext(ctx, s.q(`SELECT id FROM users WHERE id = ?`+s.d.ForUpdate), k.UserID).Scan(&id); err != nil {
				return fmt.Errorf("lock user: %w", notFound(err, "user "+k.UserID))
			}
		}
		var n int
		if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM ssh_keys WHERE user_id = ?`), k.UserID).Scan(&n); err != nil {
			return fmt.Errorf("count ssh keys: %w", err)
		}
		if n >= maxPerUser {
			return fmt.Errorf("a user may have %d SSH keys and has %d: %w", maxPerUser, n, store.ErrQuota)
		}
		_, err := tx.ExecContext(ctx, s.q(`INSERT INTO ssh_keys (id, user_id, name, fingerprint, public_key, created_at) VALUES (?, ?, ?, ?, ?, ?)`),
			k.ID, k.UserID, k.Name, k.Fingerprint, k.PublicKey, micros(k.CreatedAt))
		if err = s.wrapUnique(err, "ssh key "+k.Fingerprint); err != nil {
			return fmt.Errorf("create ssh key: %w", err)
		}
		return nil
	})
}

func (s *Store) SSHKeys(ctx context.Context, userID string) ([]store.SSHKey, error) {
	return queryAll(ctx, s, s.db, "ssh keys", `SELECT `+sshKeyCols+` FROM ssh_keys WHERE user_id = ? ORDER BY created_at, id`,
		func(row scanner) (store.SSHKey, error) { return scanSSHKey(row) }, userID)
}

func (s *Store) DeleteSSHKey(ctx context.Context, userID, idOrFingerprint string) (store.SSHKey, error) {
	var k store.SSHKey
	err := s.revokeTx(ctx, func(tx *sql.Tx) (err error) {
		k, err = scanSSHKey(tx.QueryRowContext(ctx, s.q(`DELETE FROM ssh_keys WHERE user_id = ? AND (id = ? OR fingerprint = ?)
		RETURNING `+sshKeyCols), userID, idOrFingerprint, idOrFingerprint))
		return err
	})
	if err != nil {
		return store.SSHKey{}, fmt.Errorf("delete: %w", notFound(err, fmt.Sprintf("ssh key %q", idOrFingerprint)))
	}
	return k, nil
}

func (s *Store) UserBySSHKey(ctx context.Context, fingerprint string) (workspace.User, store.SSHKey, error) {
	var u workspace.User
	var created int64
	var suspended sql.NullInt64
	k, err := scanSSHKey(s.db.QueryRowContext(ctx, s.q(`SELECT k.id, k.user_id, k.name, k.fingerprint, k.public_key, k.created_at, u.id, u.username, u.admin, u.created_at, u.suspended_at, `+userProfileCols+`
		FROM ssh_keys k JOIN users u ON u.id = k.user_id WHERE k.fingerprint = ? AND u.deleted_at IS NULL`), fingerprint),
		append([]any{&u.ID, &u.Username, &u.Admin, &created, &suspended}, profileDest(&u)...)...)
	if err != nil {
		return workspace.User{}, store.SSHKey{}, notFound(err, "user of ssh key "+fingerprint)
	}
	u.CreatedAt, u.SuspendedAt = fromMicros(created), ptrTime(suspended)
	return u, k, nil
}

func (s *Store) RecordActivity(ctx context.Context, agentID string, items []store.Activity) (int, error) {
	latest := make(map[string]int64, len(items))
	for _, it := range items {
		if at, ok := latest[it.WorkspaceID]; !ok || micros(it.At) > at {
			latest[it.WorkspaceID] = micros(it.At)
		}
	}
	ids := slices.Sorted(maps.Keys(latest))
	recorded := 0
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		recorded = 0
		// The agent's row first, as a reconcile takes it (Postgres): the UPDATE below locks many
		// workspace rows, in an order of the engine's choosing, and would otherwise deadlock with a
		// reconcile's batch or another proxy replica's report locking them in another.
		if s.d.ForUpdate != "" {
			var id string
			if err := tx.QueryRowContext(ctx, s.q(`SELECT id FROM agents WHERE id = ?`+s.d.ForUpdate), agentID).Scan(&id); err != nil {
				return fmt.Errorf("lock agent: %w", notFound(err, "agent"))
			}
		}
		t, n := s.d.TextCast, s.d.BigintCast
		for start := 0; start < len(ids); start += s.d.BatchSize {
			chunk := ids[start:min(start+s.d.BatchSize, len(ids))]
			values := make([]string, len(chunk))
			args := make([]any, 0, 2*len(chunk)+1)
			inArgs := make([]any, 0, len(chunk)+1)
			inArgs = append(inArgs, agentID)
			for i, id := range chunk {
				values[i] = "(?" + t + ", ?" + n + ")"
				args = append(args, id, latest[id])
				inArgs = append(inArgs, id)
			}
			args = append(args, agentID)
			// Only rows whose time moves forward are written: a report never moves it back, and an
			// unchanged row costs no write.
			if _, err := tx.ExecContext(ctx, s.q(`WITH v (id, at) AS (VALUES `+strings.Join(values, ", ")+`)
				UPDATE workspaces SET last_activity_at = v.at FROM v
				WHERE workspaces.id = v.id AND workspaces.agent_id = ?
				AND (workspaces.last_activity_at IS NULL OR workspaces.last_activity_at < v.at)`), args...); err != nil {
				return fmt.Errorf("record activity of %d workspaces: %w", len(chunk), err)
			}
			var mine int
			if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM workspaces WHERE agent_id = ? AND id IN (`+placeholders(len(chunk))+`)`),
				inArgs...).Scan(&mine); err != nil {
				return fmt.Errorf("count the agent's workspaces: %w", err)
			}
			recorded += mine
		}
		return nil
	})
	return recorded, err
}

var _ store.SSHKeyStore = (*Store)(nil)
