-- +goose Up
-- A workspace's metadata and resource alerts (docs/decisions.md, "Inside the workspace: metadata
-- and resource alerts"). workspace_metadata is the latest report of its helper (its resources and
-- custom metadata values, protocol.MetadataReport as JSON), written at most once a minute per
-- workspace: the server keeps the reports in memory between. workspace_alerts are its alerts, a
-- row per raise (what notifications send): a condition (memory, volume) is open until cleared_at;
-- an event (oom-killed, evicted) is cleared when raised.
CREATE TABLE workspace_metadata (
    workspace_id TEXT PRIMARY KEY REFERENCES workspaces (id) ON DELETE CASCADE,
    report       TEXT NOT NULL,
    reported_at  BIGINT NOT NULL
);

CREATE TABLE workspace_alerts (
    id           BIGSERIAL PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    kind         TEXT NOT NULL,
    subject      TEXT NOT NULL DEFAULT '',
    detail       TEXT NOT NULL,
    raised_at    BIGINT NOT NULL,
    cleared_at   BIGINT
);
CREATE INDEX workspace_alerts_workspace ON workspace_alerts (workspace_id, raised_at);

-- +goose Down
DROP TABLE workspace_alerts;
DROP TABLE workspace_metadata;
