-- +goose Up
-- A workspace's startup steps as its agent last reported them (docs/decisions.md, "Image build
-- progress"): the image build's prepare, build and push init containers, each with its state,
-- times, latest progress line and the last lines of its log (at most 16 KiB,
-- protocol.MaxStepLogBytes). position is the step's place in the order steps run in (workspace.StartupStepOrder).
CREATE TABLE workspace_startup_steps (
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    position     INTEGER NOT NULL,
    state        TEXT NOT NULL,
    started_at   BIGINT,
    ended_at     BIGINT,
    detail       TEXT NOT NULL DEFAULT '',
    log          TEXT NOT NULL DEFAULT '',
    updated_at   BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, name)
);

-- +goose Down
DROP TABLE workspace_startup_steps;
