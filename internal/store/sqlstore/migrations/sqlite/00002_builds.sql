-- +goose Up
-- The Terraform backend: templates and their versions, workspace builds, the provisioner jobs that
-- run them (with their logs), and the provisioners. Terraform workspaces live in `workspaces` with
-- backend 'terraform' and no agent.
CREATE TABLE templates (
    id                TEXT PRIMARY KEY,
    name              TEXT NOT NULL UNIQUE,
    kind              TEXT NOT NULL CHECK (kind IN ('kubernetes', 'terraform')),
    -- NULL only inside the transaction that creates the template with its first version.
    active_version_id TEXT REFERENCES template_versions (id),
    created_by        TEXT NOT NULL,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL
);

CREATE TABLE template_versions (
    id          TEXT PRIMARY KEY,
    template_id TEXT NOT NULL REFERENCES templates (id),
    number      INTEGER NOT NULL,
    archive     BLOB NOT NULL,
    hash        TEXT NOT NULL,
    variables   TEXT NOT NULL DEFAULT '[]', -- a JSON array of names
    created_by  TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    UNIQUE (template_id, number)
);

-- SQLite cannot drop a NOT NULL constraint: the workspaces table is rebuilt (no table references it
-- yet; the tables that do are created below). A terraform workspace has no agent (and so is never
-- read by a reconcile, which selects by agent_id); a kubernetes workspace always has one.
CREATE TABLE workspaces_new (
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

INSERT INTO workspaces_new (id, name, owner_id, agent_id, namespace, devfile, desired_state, actual_state,
    desired_state_updated_at, actual_state_updated_at, responded_to_agent_at, deployment_resource_version,
    error_type, error_message, url, created_at)
SELECT id, name, owner_id, agent_id, namespace, devfile, desired_state, actual_state,
    desired_state_updated_at, actual_state_updated_at, responded_to_agent_at, deployment_resource_version,
    error_type, error_message, url, created_at
FROM workspaces;

DROP TABLE workspaces;
ALTER TABLE workspaces_new RENAME TO workspaces;

CREATE INDEX workspaces_agent_id ON workspaces (agent_id);
CREATE INDEX workspaces_owner_id ON workspaces (owner_id);
-- What a partial reconcile reads: never answered, or desired state changed after the last answer.
CREATE INDEX workspaces_pending ON workspaces (agent_id)
    WHERE responded_to_agent_at IS NULL OR desired_state_updated_at > responded_to_agent_at;

CREATE TABLE workspace_builds (
    id                       TEXT PRIMARY KEY,
    workspace_id             TEXT NOT NULL REFERENCES workspaces (id),
    build_number             INTEGER NOT NULL,
    transition               TEXT NOT NULL,
    reason                   TEXT NOT NULL,
    initiator_id             TEXT NOT NULL REFERENCES users (id),
    template_version_id      TEXT NOT NULL REFERENCES template_versions (id),
    state                    BLOB, -- the Terraform state; never logged
    state_source             TEXT NOT NULL,
    state_captured_on_cancel INTEGER NOT NULL DEFAULT 0,
    orphan                   INTEGER NOT NULL DEFAULT 0,
    created_at               BIGINT NOT NULL,
    UNIQUE (workspace_id, build_number)
);

CREATE TABLE provisioner_jobs (
    id           TEXT PRIMARY KEY,
    build_id     TEXT NOT NULL UNIQUE REFERENCES workspace_builds (id),
    worker_id    TEXT NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL,
    started_at   BIGINT,
    heartbeat_at BIGINT,
    canceled_at  BIGINT,
    completed_at BIGINT,
    error        TEXT NOT NULL DEFAULT '',
    -- How many lines provisioner_job_logs holds for the job (the cap is checked against it).
    log_lines    INTEGER NOT NULL DEFAULT 0
);

-- What AcquireJob reads: the oldest pending job.
CREATE INDEX provisioner_jobs_pending ON provisioner_jobs (created_at, id)
    WHERE started_at IS NULL AND canceled_at IS NULL AND completed_at IS NULL;
-- What StaleJobs and the status counts of active jobs read.
CREATE INDEX provisioner_jobs_active ON provisioner_jobs (created_at)
    WHERE completed_at IS NULL;

CREATE TABLE provisioner_job_logs (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id     TEXT NOT NULL REFERENCES provisioner_jobs (id),
    created_at BIGINT NOT NULL,
    stage      TEXT NOT NULL,
    level      TEXT NOT NULL,
    output     TEXT NOT NULL
);

CREATE INDEX provisioner_job_logs_job ON provisioner_job_logs (job_id, id);

CREATE TABLE provisioners (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL UNIQUE,
    token_hash   BLOB NOT NULL UNIQUE,
    created_at   BIGINT NOT NULL,
    last_seen_at BIGINT
);

-- +goose Down
DROP TABLE provisioners;
DROP TABLE provisioner_job_logs;
DROP TABLE provisioner_jobs;
DROP TABLE workspace_builds;

CREATE TABLE workspaces_old (
    id                          TEXT PRIMARY KEY,
    name                        TEXT NOT NULL UNIQUE,
    owner_id                    TEXT NOT NULL REFERENCES users (id),
    agent_id                    TEXT NOT NULL REFERENCES agents (id),
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
    created_at                  BIGINT NOT NULL
);

INSERT INTO workspaces_old (id, name, owner_id, agent_id, namespace, devfile, desired_state, actual_state,
    desired_state_updated_at, actual_state_updated_at, responded_to_agent_at, deployment_resource_version,
    error_type, error_message, url, created_at)
SELECT id, name, owner_id, agent_id, namespace, devfile, desired_state, actual_state,
    desired_state_updated_at, actual_state_updated_at, responded_to_agent_at, deployment_resource_version,
    error_type, error_message, url, created_at
FROM workspaces WHERE backend = 'kubernetes';

DROP TABLE workspaces;
ALTER TABLE workspaces_old RENAME TO workspaces;

CREATE INDEX workspaces_agent_id ON workspaces (agent_id);
CREATE INDEX workspaces_owner_id ON workspaces (owner_id);
CREATE INDEX workspaces_pending ON workspaces (agent_id)
    WHERE responded_to_agent_at IS NULL OR desired_state_updated_at > responded_to_agent_at;

UPDATE templates SET active_version_id = NULL;
DROP TABLE template_versions;
DROP TABLE templates;
