package storetest

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlstore"
)

// UpgradeToTokens migrates db (empty) to schema version 15, writes a user with its one token, a
// browser session begun with it and one begun with an older token, then opens the store through
// open (migration 16) and checks that the user's token still signs in (a token named "initial"
// without expiry), that the live session survived tied to it, that the stale one is gone, and
// that the old column no longer names the token.
func UpgradeToTokens(t *testing.T, db *sql.DB, d sqlstore.Dialect, open func(t *testing.T) store.Store) {
	ctx := context.Background()
	if err := sqlstore.MigrateTo(ctx, db, d, 15); err != nil {
		t.Fatal(err)
	}
	userID := uuid.NewString()
	stmts := []rawRow{
		{`INSERT INTO users (id, username, admin, token_hash, created_at) VALUES (?, ?, ?, ?, ?)`,
			[]any{userID, "old-user", true, []byte("old-user-hash"), t0.UnixMicro()}},
		{`INSERT INTO sessions (id_hash, kind, user_id, user_token_hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
			[]any{[]byte("live"), store.SessionServer, userID, []byte("old-user-hash"), t0.UnixMicro(), t0.Add(time.Hour).UnixMicro()}},
		{`INSERT INTO sessions (id_hash, kind, user_id, user_token_hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
			[]any{[]byte("stale"), store.SessionServer, userID, []byte("older-hash"), t0.UnixMicro(), t0.Add(time.Hour).UnixMicro()}},
	}
	writeRows(t, db, d, 15, stmts)

	s := open(t)
	tok, u, err := s.TokenByHash(ctx, []byte("old-user-hash"))
	if err != nil || u.ID != userID || !u.Admin || tok.Name != "initial" || tok.ExpiresAt != nil || tok.RevokedAt != nil || tok.ID != userID {
		t.Fatalf("the old token after migration 16 = %+v, %+v, %v", tok, u, err)
	}
	ss, su, err := s.Session(ctx, []byte("live"), store.SessionServer, t0)
	if err != nil || su.ID != userID || ss.TokenID != tok.ID {
		t.Fatalf("the live session = %+v, %+v, %v", ss, su, err)
	}
	if _, _, err := s.Session(ctx, []byte("stale"), store.SessionServer, t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the stale session: %v, want ErrNotFound", err)
	}
	if _, err := s.RevokeToken(ctx, userID, "initial", t0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Session(ctx, []byte("live"), store.SessionServer, t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the migrated session outlived its token: %v", err)
	}
}
