package sqlstore

import (
	"context"
	"fmt"
	"time"
)

func (s *Store) ServerKey(ctx context.Context, name string, gen func() []byte, now time.Time) ([]byte, error) {
	// The first replica to ask stores its key; every one reads the stored one.
	if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO server_keys (name, key, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`),
		name, gen(), micros(now)); err != nil {
		return nil, fmt.Errorf("store the server key %s: %w", name, err)
	}
	var key []byte
	if err := s.db.QueryRowContext(ctx, s.q(`SELECT key FROM server_keys WHERE name = ?`), name).Scan(&key); err != nil {
		return nil, fmt.Errorf("read the server key %s: %w", name, err)
	}
	return key, nil
}
