package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// TopicRevocations: something that gave access was taken away (Store.SubscribeRevocations).
const TopicRevocations = "revocations"

const tokenCols = `t.id, t.user_id, t.name, t.hash, t.created_at, t.expires_at, t.last_used_at, t.revoked_at`

func scanToken(row interface{ Scan(...any) error }, more ...any) (store.APIToken, error) {
	var t store.APIToken
	var created int64
	var expires, used, revoked sql.NullInt64
	if err := row.Scan(append([]any{&t.ID, &t.UserID, &t.Name, &t.Hash, &created, &expires, &used, &revoked}, more...)...); err != nil {
		return t, err
	}
	t.CreatedAt, t.ExpiresAt, t.LastUsedAt, t.RevokedAt = fromMicros(created), ptrTime(expires), ptrTime(used), ptrTime(revoked)
	return t, nil
}

func (s *Store) insertToken(ctx context.Context, tx *sql.Tx, t store.APIToken) error {
	_, err := tx.ExecContext(ctx, s.q(`INSERT INTO api_tokens (id, user_id, name, hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`),
		t.ID, t.UserID, t.Name, t.Hash, micros(t.CreatedAt), nullMicros(t.ExpiresAt))
	if err = s.wrapUnique(err, fmt.Sprintf("a token named %q", t.Name)); err != nil {
		return fmt.Errorf("create token: %w", err)
	}
	return nil
}

// revokeTx is actionTx for the writes that take access away: it increments the revocation counter
// in the transaction and wakes its subscribers once committed.
func (s *Store) revokeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	err := s.actionTx(ctx, func(tx *sql.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return s.bumpRevocations(ctx, tx)
	})
	if err == nil {
		s.committed(TopicRevocations)
	}
	return err
}

func (s *Store) bumpRevocations(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `UPDATE revocations SET seq = seq + 1 WHERE id = 1`); err != nil {
		return fmt.Errorf("count the revocation: %w", err)
	}
	return s.notifyTx(ctx, tx, TopicRevocations)
}

func (s *Store) CreateUserWithToken(ctx context.Context, u workspace.User, t store.APIToken) error {
	t.UserID = u.ID
	return s.actionTx(ctx, func(tx *sql.Tx) error {
		if err := s.insertUser(ctx, tx, u); err != nil {
			return err
		}
		return s.insertToken(ctx, tx, t)
	})
}

func (s *Store) CreateToken(ctx context.Context, t store.APIToken) error {
	return s.actionTx(ctx, func(tx *sql.Tx) error {
		var id string
		err := tx.QueryRowContext(ctx, s.q(`SELECT id FROM users WHERE id = ? AND NOT system AND deleted_at IS NULL`+s.d.ForShare), t.UserID).Scan(&id)
		if err != nil {
			return notFound(err, "the token's user")
		}
		return s.insertToken(ctx, tx, t)
	})
}

func (s *Store) TokenByHash(ctx context.Context, hash []byte) (store.APIToken, workspace.User, error) {
	var u workspace.User
	var created int64
	var suspended sql.NullInt64
	t, err := scanToken(s.queryRow(ctx, `SELECT `+tokenCols+`, u.id, u.username, u.admin, u.created_at, u.suspended_at, `+userProfileCols+`
		FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = ? AND NOT u.system AND u.deleted_at IS NULL`, hash),
		append([]any{&u.ID, &u.Username, &u.Admin, &created, &suspended}, profileDest(&u)...)...)
	if err != nil {
		return store.APIToken{}, workspace.User{}, notFound(err, "token")
	}
	u.CreatedAt, u.SuspendedAt = fromMicros(created), ptrTime(suspended)
	return t, u, nil
}

func (s *Store) ListTokens(ctx context.Context, userID string) ([]store.APIToken, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+tokenCols+` FROM api_tokens t WHERE t.user_id = ? ORDER BY t.created_at DESC, t.id`), userID)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	out := []store.APIToken{}
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

func (s *Store) RevokeToken(ctx context.Context, userID, ref string, at time.Time) (store.APIToken, error) {
	var t store.APIToken
	err := s.revokeTx(ctx, func(tx *sql.Tx) error {
		var err error
		t, err = scanToken(tx.QueryRowContext(ctx, s.q(`SELECT `+tokenCols+` FROM api_tokens t WHERE t.user_id = ? AND t.id = ?`+s.d.ForUpdate), userID, ref))
		if err == sql.ErrNoRows {
			t, err = scanToken(tx.QueryRowContext(ctx, s.q(`SELECT `+tokenCols+` FROM api_tokens t WHERE t.user_id = ? AND t.name = ? AND t.revoked_at IS NULL`+s.d.ForUpdate), userID, ref))
		}
		if err != nil {
			return notFound(err, fmt.Sprintf("token %q", ref))
		}
		if t.RevokedAt != nil {
			return nil
		}
		return s.revokeTokens(ctx, tx, `id = ?`, at, t.ID)
	})
	if err != nil {
		return store.APIToken{}, err
	}
	if t.RevokedAt == nil {
		t.RevokedAt = &at
	}
	return t, nil
}

// revokeTokens revokes the tokens where selects (over api_tokens, with args) that are not revoked
// yet, and removes the sessions begun with them.
func (s *Store) revokeTokens(ctx context.Context, tx *sql.Tx, where string, at time.Time, args ...any) error {
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM sessions WHERE token_id IN (SELECT id FROM api_tokens WHERE `+where+`)`), args...); err != nil {
		return fmt.Errorf("end the token's sessions: %w", err)
	}
	if _, err := tx.ExecContext(ctx, s.q(`UPDATE api_tokens SET revoked_at = ? WHERE revoked_at IS NULL AND `+where), append([]any{micros(at)}, args...)...); err != nil {
		return fmt.Errorf("revoke tokens: %w", err)
	}
	return nil
}

func (s *Store) ResetUserTokens(ctx context.Context, userID string, t store.APIToken, at time.Time) error {
	t.UserID = userID
	return s.revokeTx(ctx, func(tx *sql.Tx) error {
		if _, err := s.lockUser(ctx, tx, userID); err != nil {
			return err
		}
		if err := s.revokeTokens(ctx, tx, `user_id = ?`, at, userID); err != nil {
			return err
		}
		// A reset after a leak ends every session of the user, those begun without a token (OIDC
		// sign-ins) too: whoever held the leaked token may have begun one. It removes the user's
		// SSH keys for the same reason: whoever held the token may have registered one of theirs,
		// which would let them into the user's workspaces through the access proxy after the reset.
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM sessions WHERE user_id = ?`), userID); err != nil {
			return fmt.Errorf("end the user's sessions: %w", err)
		}
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM ssh_keys WHERE user_id = ?`), userID); err != nil {
			return fmt.Errorf("remove the user's SSH keys: %w", err)
		}
		return s.insertToken(ctx, tx, t)
	})
}

func (s *Store) TouchToken(ctx context.Context, t store.APIToken, at time.Time, every time.Duration) error {
	if t.LastUsedAt != nil && at.Sub(*t.LastUsedAt) < every {
		return nil
	}
	_, err := s.db.ExecContext(ctx, s.q(`UPDATE api_tokens SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)`),
		micros(at), t.ID, micros(at))
	if err != nil {
		return fmt.Errorf("record the token's use: %w", err)
	}
	return nil
}

func (s *Store) ListUsers(ctx context.Context) ([]workspace.User, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+userCols+` FROM users u WHERE NOT system AND deleted_at IS NULL ORDER BY username`)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	out := []workspace.User{}
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// lockUser reads the user (not deleted, not a system user) locked for update.
func (s *Store) lockUser(ctx context.Context, tx *sql.Tx, userID string) (workspace.User, error) {
	u, err := scanUser(tx.QueryRowContext(ctx, s.q(`SELECT `+userCols+` FROM users u WHERE id = ? AND NOT system AND deleted_at IS NULL`+s.d.ForUpdate), userID))
	return u, notFound(err, "user "+userID)
}

// lockAdmins locks the rows of the active admins, in id order, and returns their ids. Writes that may
// take an admin out (suspend, delete) take these locks first, before the user's own row, so that
// two of them cannot both pass keepAnAdmin (on Postgres the second waits, then finds one fewer)
// nor deadlock.
func (s *Store) lockAdmins(ctx context.Context, tx *sql.Tx) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id FROM users WHERE admin AND NOT system AND deleted_at IS NULL AND suspended_at IS NULL ORDER BY id`+s.d.ForUpdate)
	if err != nil {
		return nil, fmt.Errorf("lock admins: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// keepAnAdmin refuses, with ErrLastAdmin, to take u out of the active admins (admins, as
// lockAdmins returned them) when no other one would be left.
func keepAnAdmin(u workspace.User, admins []string) error {
	if !slices.Contains(admins, u.ID) || len(admins) > 1 {
		return nil
	}
	return fmt.Errorf("%s is the last active admin: %w", u.Username, store.ErrLastAdmin)
}

// lockForRemoval locks the active admins, then the user.
func (s *Store) lockForRemoval(ctx context.Context, tx *sql.Tx, userID string) (workspace.User, []string, error) {
	admins, err := s.lockAdmins(ctx, tx)
	if err != nil {
		return workspace.User{}, nil, err
	}
	u, err := s.lockUser(ctx, tx, userID)
	return u, admins, err
}

func (s *Store) SetUserSuspended(ctx context.Context, userID string, at *time.Time) (workspace.User, error) {
	var u workspace.User
	write := s.actionTx
	if at != nil {
		write = s.revokeTx
	}
	err := write(ctx, func(tx *sql.Tx) error {
		var admins []string
		var err error
		if u, admins, err = s.lockForRemoval(ctx, tx, userID); err != nil {
			return err
		}
		if at != nil {
			if err := keepAnAdmin(u, admins); err != nil {
				return err
			}
			if u.SuspendedAt != nil {
				return nil // suspended already: since then
			}
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE users SET suspended_at = ? WHERE id = ?`), nullMicros(at), userID); err != nil {
			return fmt.Errorf("suspend user: %w", err)
		}
		u.SuspendedAt = at
		return nil
	})
	return u, err
}

func (s *Store) UpdateUserProfile(ctx context.Context, userID string, c workspace.ProfileChange) (workspace.User, error) {
	var u workspace.User
	err := s.actionTx(ctx, func(tx *sql.Tx) error {
		var err error
		if u, err = s.lockUser(ctx, tx, userID); err != nil {
			return err
		}
		if c.FullName != nil {
			u.FullName, u.FullNameSet = *c.FullName, *c.FullName != ""
		}
		if c.Email != nil {
			u.Email, u.EmailSet = *c.Email, *c.Email != ""
		}
		if c.DotfilesRepo != nil {
			u.DotfilesRepo = *c.DotfilesRepo
		}
		_, err = tx.ExecContext(ctx, s.q(`UPDATE users SET full_name = ?, email = ?, dotfiles_repo = ?, full_name_set = ?, email_set = ? WHERE id = ?`),
			u.FullName, u.Email, u.DotfilesRepo, u.FullNameSet, u.EmailSet, userID)
		if err != nil {
			return fmt.Errorf("update profile: %w", err)
		}
		return nil
	})
	if err != nil {
		return workspace.User{}, err
	}
	return u, nil
}

func (s *Store) DeleteUser(ctx context.Context, userID string, at time.Time) error {
	return s.revokeTx(ctx, func(tx *sql.Tx) error {
		u, admins, err := s.lockForRemoval(ctx, tx, userID)
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, s.q(`SELECT name FROM workspaces WHERE owner_id = ? AND actual_state <> ? ORDER BY name`), userID, string(workspace.Terminated))
		if err != nil {
			return fmt.Errorf("list the user's workspaces: %w", err)
		}
		var names []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				rows.Close()
				return err
			}
			names = append(names, n)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(names) > 0 {
			shown := names
			if len(shown) > 10 {
				shown = append(shown[:10:10], fmt.Sprintf("and %d more", len(names)-10))
			}
			return fmt.Errorf("%s owns %d workspace(s) that are not deleted (%s): %w", u.Username, len(names), strings.Join(shown, ", "), store.ErrOwnsWorkspaces)
		}
		if err := keepAnAdmin(u, admins); err != nil {
			return err
		}
		if err := s.revokeTokens(ctx, tx, `user_id = ?`, at, userID); err != nil {
			return err
		}
		// Its forge links go too (their sealed tokens; the rows' ON DELETE CASCADE does not fire, as
		// the user's row stays), and its links in progress.
		for _, q := range []string{`DELETE FROM sessions WHERE user_id = ?`, `DELETE FROM ssh_keys WHERE user_id = ?`,
			`DELETE FROM external_auth_links WHERE user_id = ?`, `DELETE FROM external_auth_states WHERE user_id = ?`} {
			if _, err := tx.ExecContext(ctx, s.q(q), userID); err != nil {
				return fmt.Errorf("delete user: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE users SET deleted_at = ? WHERE id = ?`), micros(at), userID); err != nil {
			return fmt.Errorf("delete user: %w", err)
		}
		return nil
	})
}

func (s *Store) SetAgentToken(ctx context.Context, agentID string, hash []byte, at time.Time) error {
	return s.revokeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`UPDATE agents SET token_hash = ?, updated_at = ? WHERE id = ?`), hash, micros(at), agentID)
		if err = s.wrapUnique(err, "agent token"); err != nil {
			return fmt.Errorf("set agent token: %w", err)
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			return fmt.Errorf("agent %s: %w", agentID, store.ErrNotFound)
		}
		return nil
	})
}

func (s *Store) SetAgentConfig(ctx context.Context, agentID string, cfg workspace.AgentConfig, at time.Time) (workspace.Agent, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return workspace.Agent{}, fmt.Errorf("encode agent config: %w", err)
	}
	var a workspace.Agent
	err = s.actionTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`UPDATE agents SET config = ?, updated_at = ? WHERE id = ?`), string(b), micros(at), agentID)
		if err != nil {
			return fmt.Errorf("set agent config: %w", err)
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			return fmt.Errorf("agent %s: %w", agentID, store.ErrNotFound)
		}
		a, err = scanAgent(tx.QueryRowContext(ctx, s.q(`SELECT `+agentCols+` FROM agents WHERE id = ?`), agentID))
		return err
	})
	return a, err
}

func (s *Store) SetProvisionerToken(ctx context.Context, name string, hash []byte) (store.Provisioner, error) {
	var p store.Provisioner
	// A revocation (RevocationSeq): a provisioner's blocked acquire reads its token again.
	err := s.revokeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`UPDATE provisioners SET token_hash = ? WHERE name = ?`), hash, name)
		if err = s.wrapUnique(err, "provisioner token"); err != nil {
			return fmt.Errorf("set provisioner token: %w", err)
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			return fmt.Errorf("provisioner %q: %w", name, store.ErrNotFound)
		}
		p, err = scanProvisioner(tx.QueryRowContext(ctx, s.q(`SELECT `+provisionerCols+` FROM provisioners WHERE name = ?`), name))
		return err
	})
	return p, err
}

func (s *Store) RevocationSeq(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.QueryRowContext(ctx, `SELECT seq FROM revocations WHERE id = 1`).Scan(&n); err != nil {
		return 0, fmt.Errorf("read the revocation counter: %w", err)
	}
	return n, nil
}

func (s *Store) SubscribeRevocations() (<-chan struct{}, func()) {
	return s.changes.subscribe(TopicRevocations)
}
