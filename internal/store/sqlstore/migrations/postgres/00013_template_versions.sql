-- +goose Up
-- Template versions and parameters (docs/decisions.md, "Template versions and parameters").
--
-- A version's parameters: the module's variables users give values for (a JSON array of
-- parameter.Parameter).
ALTER TABLE template_versions ADD COLUMN parameters TEXT NOT NULL DEFAULT '[]';
-- A terraform workspace's template version: its latest build's, written with each build (no
-- foreign key: builds reference the version already, and SQLite cannot drop a referencing column).
ALTER TABLE workspaces ADD COLUMN template_version_id TEXT;
-- A terraform workspace's parameter values (a JSON array of parameter.Value), what its builds pass.
ALTER TABLE workspaces ADD COLUMN parameters TEXT NOT NULL DEFAULT '[]';
UPDATE workspaces SET template_version_id = (SELECT b.template_version_id FROM workspace_builds b
    WHERE b.workspace_id = workspaces.id ORDER BY b.build_number DESC LIMIT 1)
    WHERE backend = 'terraform';

-- +goose Down
ALTER TABLE workspaces DROP COLUMN parameters;
ALTER TABLE workspaces DROP COLUMN template_version_id;
ALTER TABLE template_versions DROP COLUMN parameters;
