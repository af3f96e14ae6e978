-- +goose Up
-- Tokens and users (docs/decisions.md, "API tokens", "Suspending and deleting users").
--
-- A user has any number of named API tokens, each kept by its SHA-256 only, with an expiry (NULL:
-- none; only the bootstrap admin's token and the tokens migrated here have none), the time of its
-- last use and of its revocation. A name is unique among a user's tokens that are not revoked.
CREATE TABLE api_tokens (
    id           TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    hash         BYTEA NOT NULL UNIQUE,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT,
    last_used_at BIGINT,
    revoked_at   BIGINT
);
CREATE UNIQUE INDEX api_tokens_user_name ON api_tokens (user_id, name) WHERE revoked_at IS NULL;

-- Each user's one token becomes a token named 'initial' without expiry, whose id is the user's
-- (unique in this table); users.token_hash then holds a value no token hashes to (32 bytes are a
-- SHA-256, this is longer), kept only because the column is NOT NULL UNIQUE.
INSERT INTO api_tokens (id, user_id, name, hash, created_at)
    SELECT id, id, 'initial', token_hash, created_at FROM users WHERE NOT system;
UPDATE users SET token_hash = convert_to('retired:' || id, 'UTF8') WHERE NOT system;

-- A suspended user keeps its workspaces but nothing it holds is accepted; a deleted one keeps its
-- row (its name is never given to anyone else) and loses its tokens, sessions and keys.
ALTER TABLE users ADD COLUMN suspended_at BIGINT;
ALTER TABLE users ADD COLUMN deleted_at BIGINT;

-- A session begun from a token ends with it (token_id); one with no token (a sign-in that used
-- none) lives while its user is active. Sessions whose user's token had changed were dead already.
ALTER TABLE sessions ADD COLUMN token_id TEXT REFERENCES api_tokens (id) ON DELETE CASCADE;
UPDATE sessions SET token_id = (SELECT t.id FROM api_tokens t WHERE t.hash = sessions.user_token_hash);
DELETE FROM sessions WHERE token_id IS NULL;
ALTER TABLE sessions DROP COLUMN user_token_hash;
CREATE INDEX sessions_token_id ON sessions (token_id);

-- The revocation counter: every write that takes access away (a token revoked, a user suspended or
-- deleted, a key removed, a sign-out) increments it in its transaction, and proxies waiting on it
-- recheck their open SSH connections at once.
CREATE TABLE revocations (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    seq BIGINT NOT NULL
);
INSERT INTO revocations (id, seq) VALUES (1, 0);

-- +goose Down
DROP TABLE revocations;
DROP INDEX sessions_token_id;
ALTER TABLE sessions ADD COLUMN user_token_hash BYTEA NOT NULL DEFAULT ''::bytea;
UPDATE sessions SET user_token_hash = COALESCE((SELECT t.hash FROM api_tokens t WHERE t.id = sessions.token_id), ''::bytea);
ALTER TABLE sessions DROP COLUMN token_id;
UPDATE users SET token_hash = COALESCE((SELECT t.hash FROM api_tokens t WHERE t.user_id = users.id AND t.revoked_at IS NULL
    ORDER BY t.created_at LIMIT 1), token_hash) WHERE NOT system;
ALTER TABLE users DROP COLUMN deleted_at;
ALTER TABLE users DROP COLUMN suspended_at;
DROP INDEX api_tokens_user_name;
DROP TABLE api_tokens;
