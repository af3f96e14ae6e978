-- +goose Up
-- How a Terraform workspace's helper's last connection ended (docs/decisions.md, "Helper status
-- everywhere"): when, and why, as the replica that held it saw it. With workspace_agent_connections
-- (a row while a helper is connected, since connected_at) it is the helper status that show, list,
-- the API and the page give, the same on every replica and after a restart. One row per workspace,
-- replaced at each end of a connection. Unix microseconds.
CREATE TABLE workspace_helper_status (
    workspace_id    TEXT PRIMARY KEY REFERENCES workspaces (id) ON DELETE CASCADE,
    disconnected_at BIGINT NOT NULL,
    last_error      TEXT NOT NULL
);

-- +goose Down
DROP TABLE workspace_helper_status;
