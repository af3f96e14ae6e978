-- +goose Up
-- Workspace names are unique per owner among the workspaces that are not Terminated (a name is free
-- again once its workspace is), and each workspace gets a cluster name (kube_name), unique forever:
-- the name of its Kubernetes objects and, in a namespace of its own, of that namespace after
-- "hangar-" (docs/decisions.md, "Workspace names, cluster names and URLs"). Rows from before keep
-- their objects and namespace: their cluster name is their name, which was unique on the server.
-- Their URL moves to the new scheme https://<port>-<name>--<owner>.<zone>/ (no proxy served the
-- old one); a workspace whose name or owner contains "--", or whose two names do not fit one
-- 63-character label, is left without a URL.
--
-- SQLite cannot drop the column's UNIQUE: the table is rebuilt. workspace_builds references it, so
-- foreign keys are checked at the commit (defer_foreign_keys lasts for this transaction only): the
-- rows dropped with the old table count as violations until the same ids are inserted again.
PRAGMA defer_foreign_keys = ON;

CREATE TABLE workspaces_copy AS SELECT * FROM workspaces;
DROP TABLE workspaces;

CREATE TABLE workspaces (
    id                          TEXT PRIMARY KEY,
    name                        TEXT NOT NULL,
    owner_id                    TEXT NOT NULL REFERENCES users (id),
    agent_id                    TEXT REFERENCES agents (id),
    namespace                   TEXT NOT NULL,
    devfile                     TEXT NOT NULL,
    desired_state               TEXT NOT NULL,
    actual_state                TEXT NOT NULL,
    desired_state_updated_at    BIGINT NOT NULL,
    actual_state_updated_at     BIGINT,
    responded_to_agent_at       BIGINT,
    deployment_resource_version TEXT,
    error_type                  TEXT NOT NULL DEFAULT '',
    error_message               TEXT NOT NULL DEFAULT '',
    url                         TEXT NOT NULL DEFAULT '',
    created_at                  BIGINT NOT NULL,
    backend                     TEXT NOT NULL DEFAULT 'kubernetes',
    template_id                 TEXT REFERENCES templates (id),
    kube_name                   TEXT NOT NULL UNIQUE,
    CONSTRAINT workspaces_backend_agent
        CHECK (backend IN ('kubernetes', 'terraform') AND (backend = 'terraform') = (agent_id IS NULL))
);

INSERT INTO workspaces (id, name, owner_id, agent_id, namespace, devfile, desired_state, actual_state,
    desired_state_updated_at, actual_state_updated_at, responded_to_agent_at, deployment_resource_version,
    error_type, error_message, url, created_at, backend, template_id, kube_name)
SELECT c.id, c.name, c.owner_id, c.agent_id, c.namespace, c.devfile, c.desired_state, c.actual_state,
    c.desired_state_updated_at, c.actual_state_updated_at, c.responded_to_agent_at, c.deployment_resource_version,
    c.error_type, c.error_message,
    CASE
        WHEN c.url = '' THEN ''
        WHEN c.url LIKE 'https://%' AND instr(c.url, '.') > 0 AND c.name NOT LIKE '%--%' AND u.username NOT LIKE '%--%'
            AND length(c.name) + length(u.username) <= 55
        THEN substr(c.url, 1, instr(c.url, '.') - 1) || '--' || u.username || substr(c.url, instr(c.url, '.'))
        ELSE ''
    END,
    c.created_at, c.backend, c.template_id, c.name
FROM workspaces_copy c JOIN users u ON u.id = c.owner_id;

DROP TABLE workspaces_copy;

CREATE INDEX workspaces_agent_id ON workspaces (agent_id);
CREATE INDEX workspaces_owner_id ON workspaces (owner_id);
-- What a partial reconcile reads: never answered, or desired state changed after the last answer.
CREATE INDEX workspaces_pending ON workspaces (agent_id)
    WHERE responded_to_agent_at IS NULL OR desired_state_updated_at > responded_to_agent_at;
-- One workspace of a name per owner, Terminated ones aside.
CREATE UNIQUE INDEX workspaces_owner_name ON workspaces (owner_id, name) WHERE actual_state <> 'Terminated';

-- +goose Down
-- Names become unique on the server again: this fails if two owners share one.
PRAGMA defer_foreign_keys = ON;

CREATE TABLE workspaces_copy AS SELECT * FROM workspaces;
DROP TABLE workspaces;

CREATE TABLE workspaces (
    id                          TEXT PRIMARY KEY,
    name                        TEXT NOT NULL UNIQUE,
    owner_id                    TEXT NOT NULL REFERENCES users (id),
    agent_id                    TEXT REFERENCES agents (id),
    namespace                   TEXT NOT NULL,
    devfile                     TEXT NOT NULL,
    desired_state               TEXT NOT NULL,
    actual_state                TEXT NOT NULL,
    desired_state_updated_at    BIGINT NOT NULL,
    actual_state_updated_at     BIGINT,
    responded_to_agent_at       BIGINT,
    deployment_resource_version TEXT,
    error_type                  TEXT NOT NULL DEFAULT '',
    error_message               TEXT NOT NULL DEFAULT '',
    url                         TEXT NOT NULL DEFAULT '',
    created_at                  BIGINT NOT NULL,
    backend                     TEXT NOT NULL DEFAULT 'kubernetes',
    template_id                 TEXT REFERENCES templates (id),
    CONSTRAINT workspaces_backend_agent
        CHECK (backend IN ('kubernetes', 'terraform') AND (backend = 'terraform') = (agent_id IS NULL))
);

INSERT INTO workspaces (id, name, owner_id, agent_id, namespace, devfile, desired_state, actual_state,
    desired_state_updated_at, actual_state_updated_at, responded_to_agent_at, deployment_resource_version,
    error_type, error_message, url, created_at, backend, template_id)
SELECT id, name, owner_id, agent_id, namespace, devfile, desired_state, actual_state,
    desired_state_updated_at, actual_state_updated_at, responded_to_agent_at, deployment_resource_version,
    error_type, error_message, url, created_at, backend, template_id
FROM workspaces_copy;

DROP TABLE workspaces_copy;

CREATE INDEX workspaces_agent_id ON workspaces (agent_id);
CREATE INDEX workspaces_owner_id ON workspaces (owner_id);
CREATE INDEX workspaces_pending ON workspaces (agent_id)
    WHERE responded_to_agent_at IS NULL OR desired_state_updated_at > responded_to_agent_at;
