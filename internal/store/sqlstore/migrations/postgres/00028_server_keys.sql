-- +goose Up
-- Keys the server makes for itself, the same for every replica on this database (docs/decisions.md,
-- "Startup steps: the project clone and postStart"): today the key of Kubernetes workspaces'
-- helper tokens when no external auth key file is given.
CREATE TABLE server_keys (
    name       TEXT PRIMARY KEY,
    key        BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);

-- +goose Down
DROP TABLE server_keys;
