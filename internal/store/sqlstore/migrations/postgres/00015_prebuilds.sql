-- +goose Up
-- Prebuilt pools (docs/decisions.md, "Prebuilt pools").
--
-- The prebuild reconciler's own user: it owns the prebuilt workspaces until a user claims one, and
-- is the initiator of their builds. A system user like hangar-automation (migration 12): no token
-- can match its hash, the store never returns it by token or by username.
INSERT INTO users (id, username, admin, token_hash, created_at, system)
    VALUES ('00000000-0000-4000-8000-00000000b0b1', 'hangar-prebuilds', TRUE, '\x01'::bytea, 0, TRUE);

-- A template's presets: a version (NULL: the template's active one), parameters (a JSON object of
-- strings), a number of instances and schedule rules (a JSON array of {cron, instances}) read in a
-- time zone. A deleted preset keeps its row (deleted_at) until the reconciler has deleted its
-- unclaimed instances. lease_owner and lease_until let one replica at a time reconcile the preset;
-- reconciled_at is the end of its last reconcile.
CREATE TABLE template_presets (
    id            TEXT PRIMARY KEY,
    template_id   TEXT NOT NULL REFERENCES templates (id),
    name          TEXT NOT NULL,
    version_id    TEXT REFERENCES template_versions (id),
    parameters    TEXT NOT NULL DEFAULT '{}',
    instances     INTEGER NOT NULL,
    schedule      TEXT NOT NULL DEFAULT '[]',
    timezone      TEXT NOT NULL DEFAULT '',
    created_by    TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    deleted_at    BIGINT,
    lease_owner   TEXT NOT NULL DEFAULT '',
    lease_until   BIGINT,
    reconciled_at BIGINT,
    UNIQUE (template_id, name)
);

-- A workspace made from a preset (prebuilt, or created with --preset) names it (its parameters
-- are the preset's, in workspaces.parameters of migration 13).
ALTER TABLE workspaces ADD COLUMN preset_id TEXT;
CREATE INDEX workspaces_preset ON workspaces (preset_id) WHERE preset_id IS NOT NULL;

-- The seed's "Prebuild State Isolation": a prebuild's create and its claim are marked.
ALTER TABLE workspace_builds ADD COLUMN is_prebuild BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE workspace_builds ADD COLUMN is_prebuild_claim BOOLEAN NOT NULL DEFAULT FALSE;

-- +goose Down
ALTER TABLE workspace_builds DROP COLUMN is_prebuild_claim;
ALTER TABLE workspace_builds DROP COLUMN is_prebuild;
DROP INDEX workspaces_preset;
ALTER TABLE workspaces DROP COLUMN preset_id;
DROP TABLE template_presets;
DELETE FROM users WHERE id = '00000000-0000-4000-8000-00000000b0b1';
