-- +goose Up
-- SSH keys users register so that `hangar proxy` can let them into their workspaces by SSH
-- (docs/decisions.md, "SSH keys"). A key identifies one user: the proxy knows only the key a client
-- proved it holds, and finds its user by the key's fingerprint (SHA256:..., as ssh-keygen -l and
-- x/crypto/ssh's FingerprintSHA256 print it), hence unique across all users. public_key is the
-- authorized_keys line without options or comment ("ssh-ed25519 AAAA..."); the comment is at most
-- the name's default. A key goes with its user.
CREATE TABLE ssh_keys (
    id          TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    fingerprint TEXT NOT NULL UNIQUE,
    public_key  TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);
CREATE INDEX ssh_keys_user_id ON ssh_keys (user_id);

-- When a workspace was last used through the proxy (an SSH session or forward, an HTTP request),
-- as the proxies of its agent report it: the latest time they were told, never moved back, for
-- stopping idle workspaces later. NULL: never. Unix microseconds, like every time of the table. A
-- column of its own that only the activity writers (Store.RecordActivity, RecordWorkspaceActivity)
-- write, each never moving it back: the reconcile's and the user's writes never carry it, so
-- neither can undo a report.
ALTER TABLE workspaces ADD COLUMN last_activity_at BIGINT;

-- +goose Down
ALTER TABLE workspaces DROP COLUMN last_activity_at;
DROP TABLE ssh_keys;
