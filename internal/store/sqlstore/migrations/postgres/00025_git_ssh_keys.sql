-- +goose Up
-- A user's git SSH key (docs/decisions.md, "A team's repository: a git SSH key per user"): one
-- ed25519 key per user, made on first need, whose public half the user adds to their forge. The
-- private key is sealed with AES-256-GCM under the external auth key key_id names
-- (internal/gitssh); it never leaves the server in the clear: workspaces ask the server to sign.
CREATE TABLE git_ssh_keys (
    user_id      TEXT PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    public_key   TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    key_id       TEXT NOT NULL,
    private_key  BYTEA NOT NULL,
    created_at   BIGINT NOT NULL
);

-- +goose Down
DROP TABLE git_ssh_keys;
