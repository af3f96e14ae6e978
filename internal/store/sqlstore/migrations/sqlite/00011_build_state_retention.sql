-- +goose Up
-- Only the latest builds of a workspace keep their Terraform state (store.KeptBuildStates): an
-- older build's state is removed when a newer build is created, and state_pruned says so
-- (docs/decisions.md, "Only the latest builds keep their state").
ALTER TABLE workspace_builds ADD COLUMN state_pruned INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE workspace_builds DROP COLUMN state_pruned;
