-- +goose Up
-- The start-latency SLI (docs/decisions.md, "Start latency across replicas"): a workspace's start
-- asked for (create, start, restart) and not yet seen Running. The request's time is kept with the
-- desired state, in the database, because the Running report that ends the wait may reach another
-- replica than the request did; the transaction that writes Running deletes the row and observes
-- the latency, so each start is measured once, by one replica.
CREATE TABLE workspace_starts (
    workspace_id TEXT PRIMARY KEY REFERENCES workspaces (id) ON DELETE CASCADE,
    requested_at BIGINT NOT NULL
);

-- +goose Down
DROP TABLE workspace_starts;
