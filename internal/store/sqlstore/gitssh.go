package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/hangar-dev/hangar/internal/store"
)

func (s *Store) CreateGitSSHKey(ctx context.Context, k store.GitSSHKey) error {
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO git_ssh_keys (user_id, public_key, fingerprint, key_id, private_key, created_at)
		VALUES (?, ?, ?, ?, ?, ?)`), k.UserID, k.PublicKey, k.Fingerprint, k.KeyID, k.PrivateKey, micros(k.CreatedAt))
	if err = s.wrapUnique(err, "git SSH key of this user"); err != nil {
		return fmt.Errorf("store the git SSH key: %w", err)
	}
	return nil
}

func (s *Store) ReplaceGitSSHKey(ctx context.Context, k store.GitSSHKey) error {
	err := s.actionTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, s.q(`INSERT INTO git_ssh_keys (user_id, public_key, fingerprint, key_id, private_key, created_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (user_id) DO UPDATE SET public_key = excluded.public_key,
		fingerprint = excluded.fingerprint, key_id = excluded.key_id, private_key = excluded.private_key, created_at = excluded.created_at`),
			k.UserID, k.PublicKey, k.Fingerprint, k.KeyID, k.PrivateKey, micros(k.CreatedAt))
		return err
	})
	if err != nil {
		return fmt.Errorf("replace the git SSH key: %w", err)
	}
	return nil
}

func (s *Store) GitSSHKey(ctx context.Context, userID string) (store.GitSSHKey, error) {
	k := store.GitSSHKey{UserID: userID}
	var created int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT public_key, fingerprint, key_id, private_key, created_at FROM git_ssh_keys WHERE user_id = ?`), userID).
		Scan(&k.PublicKey, &k.Fingerprint, &k.KeyID, &k.PrivateKey, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return store.GitSSHKey{}, fmt.Errorf("git SSH key: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.GitSSHKey{}, fmt.Errorf("read the git SSH key: %w", err)
	}
	k.CreatedAt = fromMicros(created)
	return k, nil
}
