-- +goose Up
-- Times are Unix microseconds (UTC) in both dialects, so that comparisons and precision are identical.
CREATE TABLE users (
    id          TEXT PRIMARY KEY,
    username    TEXT NOT NULL UNIQUE,
    admin       BOOLEAN NOT NULL DEFAULT FALSE,
    token_hash  BYTEA NOT NULL UNIQUE,
    created_at  BIGINT NOT NULL
);

CREATE TABLE agents (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    token_hash  BYTEA NOT NULL UNIQUE,
    config      TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);

CREATE TABLE workspaces (
    id                          TEXT PRIMARY KEY,
    name                        TEXT NOT NULL UNIQUE,
    owner_id                    TEXT NOT NULL REFERENCES users (id),
    agent_id                    TEXT NOT NULL REFERENCES agents (id),
    namespace                   TEXT NOT NULL,
    devfile                     TEXT NOT NULL,
    desired_state               TEXT NOT NULL,
    actual_state                TEXT NOT NULL,
    desired_state_updated_at    BIGINT NOT NULL,
    actual_state_updated_at     BIGINT,
    responded_to_agent_at       BIGINT,
    deployment_resource_version TEXT,
    error_type                  TEXT NOT NULL DEFAULT '',
    error_message               TEXT NOT NULL DEFAULT '',
    url                         TEXT NOT NULL DEFAULT '',
    created_at                  BIGINT NOT NULL
);

CREATE INDEX workspaces_agent_id ON workspaces (agent_id);
CREATE INDEX workspaces_owner_id ON workspaces (owner_id);
-- What a partial reconcile reads: never answered, or desired state changed after the last answer.
CREATE INDEX workspaces_pending ON workspaces (agent_id)
    WHERE responded_to_agent_at IS NULL OR desired_state_updated_at > responded_to_agent_at;

-- +goose Down
DROP TABLE workspaces;
DROP TABLE agents;
DROP TABLE users;
