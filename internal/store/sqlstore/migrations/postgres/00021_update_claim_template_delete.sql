-- +goose Up
-- Issue 21's defects (docs/decisions.md, "The first hour: the update, claim, lifecycle and
-- template defects (issue 21)").
-- start_parameters: the parameter values an update's stop hands to the start that follows it (a
-- JSON array, as workspaces.parameters); NULL: the start keeps the workspace's values. The stop
-- runs with the workspace's old values, which change only when the start is queued.
ALTER TABLE workspace_builds ADD COLUMN start_parameters TEXT;
-- claimed_at: when a prebuilt workspace was claimed by its user (NULL: never a prebuilt one, or
-- not claimed). The claim also sets created_at: a workspace's created_at is when it became its
-- owner's; its builds keep their own times, the prebuild's among them.
ALTER TABLE workspaces ADD COLUMN claimed_at BIGINT;
-- A deleted template keeps its row (its versions are what its terminated workspaces' builds ran);
-- its name moves to deleted_name and name becomes 'deleted:' || id, which no template name can be,
-- so that the name can be used again.
ALTER TABLE templates ADD COLUMN deleted_at BIGINT;
ALTER TABLE templates ADD COLUMN deleted_name TEXT;

-- +goose Down
ALTER TABLE templates DROP COLUMN deleted_name;
ALTER TABLE templates DROP COLUMN deleted_at;
ALTER TABLE workspaces DROP COLUMN claimed_at;
ALTER TABLE workspace_builds DROP COLUMN start_parameters;
