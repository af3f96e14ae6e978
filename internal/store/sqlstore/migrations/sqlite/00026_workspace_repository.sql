-- +goose Up
-- The definition follows the repository (docs/decisions.md, "A team's repository: the definition
-- follows the repository"): a workspace created from a repository keeps where its definition
-- comes from (the URL, ref and devcontainer path given, and the commit and file it was last read
-- at), so that `hangar update` reads it again. '' for a workspace not made from a repository.
-- definition_generation counts the definitions the workspace has had (1: the one of its create):
-- parsed devfiles are cached by (id, generation), so every replica sees an update.
ALTER TABLE workspaces ADD COLUMN repo_url TEXT NOT NULL DEFAULT '';
ALTER TABLE workspaces ADD COLUMN repo_ref TEXT NOT NULL DEFAULT '';
ALTER TABLE workspaces ADD COLUMN repo_devcontainer_path TEXT NOT NULL DEFAULT '';
ALTER TABLE workspaces ADD COLUMN repo_commit TEXT NOT NULL DEFAULT '';
ALTER TABLE workspaces ADD COLUMN repo_definition_path TEXT NOT NULL DEFAULT '';
ALTER TABLE workspaces ADD COLUMN repo_read_at BIGINT;
ALTER TABLE workspaces ADD COLUMN definition_generation BIGINT NOT NULL DEFAULT 1;

-- The install of the owner's dotfiles, as the workspace's helper last reported it (docs/decisions.md,
-- "A team's repository: the definition follows the repository"): its state, the repository and
-- script, why it failed, and the last lines of its log (at most 4 KiB, the helper's bound).
CREATE TABLE workspace_dotfiles (
    workspace_id TEXT PRIMARY KEY REFERENCES workspaces (id) ON DELETE CASCADE,
    state        TEXT NOT NULL,
    repository   TEXT NOT NULL,
    script       TEXT NOT NULL DEFAULT '',
    error        TEXT NOT NULL DEFAULT '',
    log          TEXT NOT NULL DEFAULT '',
    updated_at   BIGINT NOT NULL
);

-- +goose Down
DROP TABLE workspace_dotfiles;
ALTER TABLE workspaces DROP COLUMN definition_generation;
ALTER TABLE workspaces DROP COLUMN repo_read_at;
ALTER TABLE workspaces DROP COLUMN repo_definition_path;
ALTER TABLE workspaces DROP COLUMN repo_commit;
ALTER TABLE workspaces DROP COLUMN repo_devcontainer_path;
ALTER TABLE workspaces DROP COLUMN repo_ref;
ALTER TABLE workspaces DROP COLUMN repo_url;
