package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

const sessionCols = `id_hash, kind, user_id, user_token_hash, workspace_id, host, parent_hash, created_at, expires_at`

func scanSession(row interface{ Scan(...any) error }) (store.Session, error) {
	var ss store.Session
	var created, expires int64
	if err := row.Scan(&ss.IDHash, &ss.Kind, &ss.UserID, &ss.UserTokenHash, &ss.WorkspaceID, &ss.Host, &ss.ParentHash, &created, &expires); err != nil {
		return ss, err
	}
	ss.CreatedAt, ss.ExpiresAt = fromMicros(created), fromMicros(expires)
	if len(ss.UserTokenHash) == 0 {
		ss.UserTokenHash = nil // a session without a token (an OIDC sign-in), stored empty
	}
	return ss, nil
}

func (s *Store) CreateSession(ctx context.Context, ss store.Session) error {
	return s.actionTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM sessions WHERE expires_at < ?`), micros(ss.CreatedAt)); err != nil {
			return fmt.Errorf("remove expired sessions: %w", err)
		}
		_, err := tx.ExecContext(ctx, s.q(`INSERT INTO sessions (`+sessionCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			ss.IDHash, ss.Kind, ss.UserID, tokenHashColumn(ss.UserTokenHash), ss.WorkspaceID, ss.Host, nullBytes(ss.ParentHash), micros(ss.CreatedAt), micros(ss.ExpiresAt))
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

// sessionUser checks ss is still valid at now and reads its user.
func (s *Store) sessionUser(ctx context.Context, db rowQuerier, ss store.Session, now time.Time) (store.Session, workspace.User, error) {
	if !now.Before(ss.ExpiresAt) {
		return store.Session{}, workspace.User{}, fmt.Errorf("%s session expired: %w", ss.Kind, store.ErrNotFound)
	}
	u, err := scanUser(db.QueryRowContext(ctx, s.q(`SELECT `+userCols+` FROM users WHERE id = ?`), ss.UserID))
	if err != nil {
		return store.Session{}, workspace.User{}, notFound(err, "the session's user")
	}
	if ss.UserTokenHash != nil && !bytes.Equal(u.TokenHash, ss.UserTokenHash) {
		return store.Session{}, workspace.User{}, fmt.Errorf("%s session: the user's token changed since: %w", ss.Kind, store.ErrNotFound)
	}
	return ss, u, nil
}

func (s *Store) DeleteSession(ctx context.Context, idHash []byte) error {
	if _, err := s.db.ExecContext(ctx, s.q(`DELETE FROM sessions WHERE id_hash = ? OR parent_hash = ?`), idHash, idHash); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// tokenHashColumn is how a session's UserTokenHash is stored: a session begun without a token (nil:
// an OIDC sign-in) has an empty one, the column being NOT NULL since migration 4.
func tokenHashColumn(h []byte) []byte {
	if h == nil {
		return []byte{}
	}
	return h
}

type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}
