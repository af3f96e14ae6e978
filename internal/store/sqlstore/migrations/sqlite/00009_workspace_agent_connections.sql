-- +goose Up
-- Which server replica a Terraform workspace's helper is connected to (docs/decisions.md,
-- "Terraform workspaces: the helper connects out"): the connection lives in that process's memory,
-- so another replica answers a user "connected to another server replica" instead of "not
-- connected". One row per workspace, written when a helper connects, removed by the replica that
-- wrote it when the connection ends. A replica that died leaves its row until the helper connects
-- again (to any replica). Unix microseconds.
CREATE TABLE workspace_agent_connections (
    workspace_id TEXT PRIMARY KEY REFERENCES workspaces (id) ON DELETE CASCADE,
    replica      TEXT NOT NULL,
    connected_at BIGINT NOT NULL
);

-- +goose Down
DROP TABLE workspace_agent_connections;
