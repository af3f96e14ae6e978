-- +goose Up
-- When a workspace's helper last saw work inside it, and what (docs/decisions.md, "Inside the
-- workspace: idle by real work"): the use a policy with activity "work" counts for the autostop
-- TTL and dormancy. Written at most every 30 s per workspace while it works; a table of its own so
-- that the writes neither touch the workspaces' rows nor mark them changed for the live list.
CREATE TABLE workspace_work (
    workspace_id TEXT PRIMARY KEY REFERENCES workspaces (id) ON DELETE CASCADE,
    at           BIGINT NOT NULL,
    reason       TEXT NOT NULL DEFAULT ''
);

-- +goose Down
DROP TABLE workspace_work;
