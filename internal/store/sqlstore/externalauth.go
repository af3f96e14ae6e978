package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
)

const externalAuthLinkCols = `user_id, provider_id, key_id, access_token, refresh_token, expires_at, account_login, account_email,
	linked_at, refreshed_at, refresh_error, relink_reason, refresh_claimed_until, version`

func scanExternalAuthLink(row interface{ Scan(...any) error }) (store.ExternalAuthLink, error) {
	var l store.ExternalAuthLink
	var expires, refreshed, claimed sql.NullInt64
	var linked int64
	if err := row.Scan(&l.UserID, &l.ProviderID, &l.KeyID, &l.AccessToken, &l.RefreshToken, &expires, &l.AccountLogin, &l.AccountEmail,
		&linked, &refreshed, &l.RefreshError, &l.RelinkReason, &claimed, &l.Version); err != nil {
		return store.ExternalAuthLink{}, err
	}
	l.ExpiresAt, l.RefreshedAt, l.LinkedAt, l.RefreshClaimedUntil = ptrTime(expires), ptrTime(refreshed), fromMicros(linked), ptrTime(claimed)
	return l, nil
}

func (s *Store) PutExternalAuthLink(ctx context.Context, l store.ExternalAuthLink) (store.ExternalAuthLink, error) {
	var out store.ExternalAuthLink
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var version int64
		err := tx.QueryRowContext(ctx, s.q(`SELECT version FROM external_auth_links WHERE user_id = ? AND provider_id = ?`+s.d.ForUpdate),
			l.UserID, l.ProviderID).Scan(&version)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			l.Version = 1
			_, err = tx.ExecContext(ctx, s.q(`INSERT INTO external_auth_links (`+externalAuthLinkCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
				l.UserID, l.ProviderID, l.KeyID, l.AccessToken, l.RefreshToken, nullMicros(l.ExpiresAt), l.AccountLogin, l.AccountEmail,
				micros(l.LinkedAt), nullMicros(l.RefreshedAt), l.RefreshError, l.RelinkReason, nullMicros(l.RefreshClaimedUntil), l.Version)
			if err = s.wrapUnique(err, "external auth link"); err != nil {
				return fmt.Errorf("insert the link: %w", err)
			}
		case err != nil:
			return fmt.Errorf("read the link: %w", err)
		default:
			l.Version = version + 1
			if _, err := tx.ExecContext(ctx, s.q(`UPDATE external_auth_links SET key_id = ?, access_token = ?, refresh_token = ?, expires_at = ?,
				account_login = ?, account_email = ?, linked_at = ?, refreshed_at = ?, refresh_error = ?, relink_reason = ?,
				refresh_claimed_until = ?, version = ? WHERE user_id = ? AND provider_id = ?`),
				l.KeyID, l.AccessToken, l.RefreshToken, nullMicros(l.ExpiresAt), l.AccountLogin, l.AccountEmail, micros(l.LinkedAt),
				nullMicros(l.RefreshedAt), l.RefreshError, l.RelinkReason, nullMicros(l.RefreshClaimedUntil), l.Version, l.UserID, l.ProviderID); err != nil {
				return fmt.Errorf("replace the link: %w", err)
			}
		}
		out = l
		return nil
	})
	if err != nil {
		return store.ExternalAuthLink{}, fmt.Errorf("link %s to %s: %w", l.UserID, l.ProviderID, err)
	}
	return out, nil
}

func (s *Store) ExternalAuthLink(ctx context.Context, userID, providerID string) (store.ExternalAuthLink, error) {
	l, err := scanExternalAuthLink(s.db.QueryRowContext(ctx, s.q(`SELECT `+externalAuthLinkCols+` FROM external_auth_links WHERE user_id = ? AND provider_id = ?`),
		userID, providerID))
	if errors.Is(err, sql.ErrNoRows) {
		return store.ExternalAuthLink{}, fmt.Errorf("link to %s: %w", providerID, store.ErrNotFound)
	}
	if err != nil {
		return store.ExternalAuthLink{}, fmt.Errorf("read the link to %s: %w", providerID, err)
	}
	return l, nil
}

func (s *Store) ExternalAuthLinks(ctx context.Context, userID string) ([]store.ExternalAuthLink, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+externalAuthLinkCols+` FROM external_auth_links WHERE user_id = ? ORDER BY provider_id`), userID)
	if err != nil {
		return nil, fmt.Errorf("list the links: %w", err)
	}
	defer rows.Close()
	var out []store.ExternalAuthLink
	for rows.Next() {
		l, err := scanExternalAuthLink(rows)
		if err != nil {
			return nil, fmt.Errorf("list the links: %w", err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the links: %w", err)
	}
	return out, nil
}

func (s *Store) UpdateExternalAuthLink(ctx context.Context, l store.ExternalAuthLink) (store.ExternalAuthLink, error) {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE external_auth_links SET key_id = ?, access_token = ?, refresh_token = ?, expires_at = ?,
		refreshed_at = ?, refresh_error = ?, relink_reason = ?, refresh_claimed_until = ?, version = version + 1
		WHERE user_id = ? AND provider_id = ? AND version = ?`),
		l.KeyID, l.AccessToken, l.RefreshToken, nullMicros(l.ExpiresAt), nullMicros(l.RefreshedAt), l.RefreshError, l.RelinkReason,
		nullMicros(l.RefreshClaimedUntil), l.UserID, l.ProviderID, l.Version)
	if err != nil {
		return store.ExternalAuthLink{}, fmt.Errorf("update the link to %s: %w", l.ProviderID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return store.ExternalAuthLink{}, fmt.Errorf("update the link to %s: %w", l.ProviderID, err)
	}
	if n == 0 {
		// Unlinked, or written by another replica since l was read.
		if _, err := s.ExternalAuthLink(ctx, l.UserID, l.ProviderID); err != nil {
			return store.ExternalAuthLink{}, err
		}
		return store.ExternalAuthLink{}, fmt.Errorf("the link to %s changed since it was read: %w", l.ProviderID, store.ErrConflict)
	}
	l.Version++
	return l, nil
}

func (s *Store) DeleteExternalAuthLink(ctx context.Context, userID, providerID string) error {
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM external_auth_links WHERE user_id = ? AND provider_id = ?`), userID, providerID)
	if err != nil {
		return fmt.Errorf("unlink %s: %w", providerID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("unlink %s: %w", providerID, err)
	} else if n == 0 {
		return fmt.Errorf("link to %s: %w", providerID, store.ErrNotFound)
	}
	return nil
}

func (s *Store) CreateExternalAuthState(ctx context.Context, st store.ExternalAuthState, now time.Time) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM external_auth_states WHERE expires_at <= ?`), micros(now)); err != nil {
			return fmt.Errorf("delete expired link states: %w", err)
		}
		_, err := tx.ExecContext(ctx, s.q(`INSERT INTO external_auth_states (state_hash, user_id, provider_id, code_verifier, expires_at) VALUES (?, ?, ?, ?, ?)`),
			st.StateHash, st.UserID, st.ProviderID, st.CodeVerifier, micros(st.ExpiresAt))
		if err = s.wrapUnique(err, "link state"); err != nil {
			return fmt.Errorf("record the link state: %w", err)
		}
		return nil
	})
}

func (s *Store) TakeExternalAuthState(ctx context.Context, stateHash []byte, now time.Time) (store.ExternalAuthState, error) {
	var st store.ExternalAuthState
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var exp int64
		err := tx.QueryRowContext(ctx, s.q(`SELECT user_id, provider_id, code_verifier, expires_at FROM external_auth_states WHERE state_hash = ?`+s.d.ForUpdate),
			stateHash).Scan(&st.UserID, &st.ProviderID, &st.CodeVerifier, &exp)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("link state: %w", store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("read the link state: %w", err)
		}
		res, err := tx.ExecContext(ctx, s.q(`DELETE FROM external_auth_states WHERE state_hash = ?`), stateHash)
		if err != nil {
			return fmt.Errorf("take the link state: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return fmt.Errorf("link state taken by another request: %w", store.ErrNotFound)
		}
		// An expired state is deleted too, and refused once that is committed.
		st.StateHash, st.ExpiresAt = stateHash, fromMicros(exp)
		return nil
	})
	if err != nil {
		return store.ExternalAuthState{}, err
	}
	if !now.Before(st.ExpiresAt) {
		return store.ExternalAuthState{}, fmt.Errorf("link state expired at %s: %w", st.ExpiresAt.Format(time.RFC3339), store.ErrNotFound)
	}
	return st, nil
}
