-- +goose Up
-- Sign-in sessions of the access proxy (docs/decisions.md, "The access proxy"): a browser's session
-- on the server (kind 'server'), a one-time code the server hands a proxy through the browser (kind
-- 'code', bound to a workspace and a host), and a workspace session the proxy keeps in its cookie
-- (kind 'workspace', bound to a workspace and a host). Only the SHA-256 of each secret is stored.
-- user_token_hash is the user's token when the session began: a session outlives neither its user
-- nor a change of the user's token.
CREATE TABLE sessions (
    id_hash         BYTEA PRIMARY KEY,
    kind            TEXT NOT NULL CHECK (kind IN ('server', 'code', 'workspace')),
    user_id         TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    user_token_hash BYTEA NOT NULL,
    workspace_id    TEXT NOT NULL DEFAULT '',
    host            TEXT NOT NULL DEFAULT '',
    created_at      BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL
);
CREATE INDEX sessions_expires_at ON sessions (expires_at);

-- +goose Down
DROP TABLE sessions;
