package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// maxUsernameTries bounds the suffixes SignInOIDC tries ("-2" to "-<n>") before giving up.
const maxUsernameTries = 100

func (s *Store) SignInOIDC(ctx context.Context, in store.OIDCSignIn) (workspace.User, bool, error) {
	var u workspace.User
	var created bool
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		u, created = workspace.User{}, false
		var userID string
		err := tx.QueryRowContext(ctx, s.q(`SELECT user_id FROM oidc_identities WHERE issuer = ? AND subject = ?`), in.Issuer, in.Subject).Scan(&userID)
		switch {
		case err == nil:
			var deleted bool
			if err := tx.QueryRowContext(ctx, s.q(`SELECT deleted_at IS NOT NULL FROM users WHERE id = ?`+s.d.ForUpdate), userID).Scan(&deleted); err != nil {
				return fmt.Errorf("read the linked user: %w", err)
			}
			if deleted {
				return fmt.Errorf("the user linked to this identity was deleted: %w", store.ErrNotFound)
			}
			if _, err := tx.ExecContext(ctx, s.q(`UPDATE users SET admin = ?,
				full_name = CASE WHEN full_name_set THEN full_name ELSE ? END, email = CASE WHEN email_set THEN email ELSE ? END WHERE id = ?`),
				in.Admin, in.FullName, in.ProfileEmail, userID); err != nil {
				return fmt.Errorf("set the admin flag and profile: %w", err)
			}
			if _, err := tx.ExecContext(ctx, s.q(`UPDATE oidc_identities SET email = ?, last_signin_at = ? WHERE issuer = ? AND subject = ?`),
				in.Email, micros(in.At), in.Issuer, in.Subject); err != nil {
				return fmt.Errorf("record the sign-in: %w", err)
			}
			if u, err = scanUser(tx.QueryRowContext(ctx, s.q(`SELECT `+userCols+` FROM users u WHERE id = ?`), userID)); err != nil {
				return fmt.Errorf("read the linked user: %w", err)
			}
		case errors.Is(err, sql.ErrNoRows):
			name, err := s.freeUsername(ctx, tx, in.Username)
			if err != nil {
				return err
			}
			u = workspace.User{ID: in.UserID, Username: name, Admin: in.Admin, TokenHash: in.TokenHash, CreatedAt: in.At, FullName: in.FullName, Email: in.ProfileEmail}
			_, err = tx.ExecContext(ctx, s.q(`INSERT INTO users (id, username, admin, token_hash, created_at, full_name, email) VALUES (?, ?, ?, ?, ?, ?, ?)`),
				u.ID, u.Username, u.Admin, u.TokenHash, micros(u.CreatedAt), u.FullName, u.Email)
			if err = s.wrapUnique(err, fmt.Sprintf("user %q", name)); err != nil {
				return fmt.Errorf("create user: %w", err)
			}
			_, err = tx.ExecContext(ctx, s.q(`INSERT INTO oidc_identities (issuer, subject, user_id, email, created_at, last_signin_at) VALUES (?, ?, ?, ?, ?, ?)`),
				in.Issuer, in.Subject, u.ID, in.Email, micros(in.At), micros(in.At))
			if err = s.wrapUnique(err, "OIDC identity"); err != nil {
				return fmt.Errorf("link the OIDC identity: %w", err)
			}
			created = true
			if err := s.insertAudit(ctx, tx, audit.Entry{Time: in.At, Actor: audit.Actor{ID: u.ID, Name: u.Username}, Action: audit.UserCreate,
				Target: audit.Target{Kind: audit.KindUser, ID: u.ID, Name: u.Username}, Outcome: audit.Success,
				Details: map[string]any{"method": "oidc", "issuer": in.Issuer, "admin": u.Admin}}); err != nil {
				return err
			}
		default:
			return fmt.Errorf("find the OIDC identity: %w", err)
		}
		return nil
	})
	if err != nil {
		return workspace.User{}, false, err
	}
	return u, created, nil
}

// freeUsername returns base, or base-2, base-3... whichever no user (system users included) has.
// Two first sign-ins racing for the same name both see it free; the loser's insert fails with
// ErrConflict and the caller tries again.
func (s *Store) freeUsername(ctx context.Context, tx *sql.Tx, base string) (string, error) {
	for i := 1; i <= maxUsernameTries; i++ {
		name := base
		if i > 1 {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		var one int
		err := tx.QueryRowContext(ctx, s.q(`SELECT 1 FROM users WHERE username = ?`), name).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return name, nil
		}
		if err != nil {
			return "", fmt.Errorf("look up username %q: %w", name, err)
		}
	}
	return "", fmt.Errorf("usernames %q to %q are all taken: %w", base, fmt.Sprintf("%s-%d", base, maxUsernameTries), store.ErrConflict)
}
