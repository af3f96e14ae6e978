package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

const sessionCols = `id_hash, kind, user_id, token_id, workspace_id, host, parent_hash, created_at, expires_at`

func scanSession(row interface{ Scan(...any) error }) (store.Session, error) {
	var ss store.Session
	var created, expires int64
	var tokenID sql.NullString
	if err := row.Scan(&ss.IDHash, &ss.Kind, &ss.UserID, &tokenID, &ss.WorkspaceID, &ss.Host, &ss.ParentHash, &created, &expires); err != nil {
		return ss, err
	}
	ss.TokenID = tokenID.String
	ss.CreatedAt, ss.ExpiresAt = fromMicros(created), fromMicros(expires)
	return ss, nil
}

func (s *Store) CreateSession(ctx context.Context, ss store.Session) error {
	return s.actionTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM sessions WHERE expires_at < ?`), micros(ss.CreatedAt)); err != nil {
			return fmt.Errorf("remove expired sessions: %w", err)
		}
		_, err := tx.ExecContext(ctx, s.q(`INSERT INTO sessions (`+sessionCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			ss.IDHash, ss.Kind, ss.UserID, nullID(ss.TokenID), ss.WorkspaceID, ss.Host, nullBytes(ss.ParentHash), micros(ss.CreatedAt), micros(ss.ExpiresAt))
		if err = s.wrapUnique(err, "session"); err != nil {
			return fmt.Errorf("create session: %w", err)
		}
		return nil
	})
}

func (s *Store) Session(ctx context.Context, idHash []byte, kind string, now time.Time) (store.Session, workspace.User, error) {
	ss, err := scanSession(s.db.QueryRowContext(ctx, s.q(`SELECT `+sessionCols+` FROM sessions WHERE id_hash = ? AND kind = ?`), idHash, kind))
	if err != nil {
		return store.Session{}, workspace.User{}, notFound(err, kind+" session")
	}
	return s.sessionUser(ctx, s.db, ss, now)
}

func (s *Store) ConsumeSession(ctx context.Context, idHash []byte, kind string, now time.Time) (store.Session, workspace.User, error) {
	var ss store.Session
	var u workspace.User
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		ss, err = scanSession(tx.QueryRowContext(ctx, s.q(`DELETE FROM sessions WHERE id_hash = ? AND kind = ? RETURNING `+sessionCols), idHash, kind))
		if err != nil {
			return notFound(err, kind+" session")
		}
		ss, u, err = s.sessionUser(ctx, tx, ss, now)
		return err
	})
	if err != nil {
		// An invalid session is left in place (the transaction rolled back): it is of no use, and
		// CreateSession removes it once it expires.
		return store.Session{}, workspace.User{}, err
	}
	return ss, u, nil
}

// sessionUser checks ss is still valid at now and reads its user: the session has not expired, its
// user is neither deleted nor suspended, and the token it began with (if any) is neither revoked
// nor expired.
func (s *Store) sessionUser(ctx context.Context, db rowQuerier, ss store.Session, now time.Time) (store.Session, workspace.User, error) {
	if !now.Before(ss.ExpiresAt) {
		return store.Session{}, workspace.User{}, fmt.Errorf("%s session expired: %w", ss.Kind, store.ErrNotFound)
	}
	var expires, revoked sql.NullInt64
	var tokenID sql.NullString
	u, err := scanUser(db.QueryRowContext(ctx, s.q(`SELECT `+userCols+`, t.id, t.expires_at, t.revoked_at
		FROM users u LEFT JOIN api_tokens t ON t.id = ? WHERE u.id = ? AND NOT u.system AND u.deleted_at IS NULL`), nullID(ss.TokenID), ss.UserID),
		&tokenID, &expires, &revoked)
	if err != nil {
		return store.Session{}, workspace.User{}, notFound(err, "the session's user")
	}
	switch {
	case u.SuspendedAt != nil:
		return store.Session{}, workspace.User{}, fmt.Errorf("%s session: its user is suspended: %w", ss.Kind, store.ErrNotFound)
	case ss.TokenID == "":
		return ss, u, nil
	case !tokenID.Valid || revoked.Valid:
		return store.Session{}, workspace.User{}, fmt.Errorf("%s session: its token was revoked: %w", ss.Kind, store.ErrNotFound)
	case expires.Valid && micros(now) >= expires.Int64:
		return store.Session{}, workspace.User{}, fmt.Errorf("%s session: its token expired: %w", ss.Kind, store.ErrNotFound)
	}
	return ss, u, nil
}

func (s *Store) DeleteSession(ctx context.Context, idHash []byte) error {
	return s.revokeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM sessions WHERE id_hash = ? OR parent_hash = ?`), idHash, idHash); err != nil {
			return fmt.Errorf("delete session: %w", err)
		}
		return nil
	})
}

type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}
