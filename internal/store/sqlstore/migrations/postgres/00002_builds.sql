-- +goose Up
-- The Terraform backend: templates and their versions, workspace builds, the provisioner jobs that
-- run them (with their logs), and the provisioners. Terraform workspaces live in `workspaces` with
-- backend 'terraform' and no agent.
CREATE TABLE templates (
    id                TEXT PRIMARY KEY,
    name              TEXT NOT NULL UNIQUE,
    kind              TEXT NOT NULL CHECK (kind IN ('kubernetes', 'terraform')),
    -- NULL only inside the transaction that creates the template with its first version.
    active_version_id TEXT,
    created_by        TEXT NOT NULL,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL
);

CREATE TABLE template_versions (
    id          TEXT PRIMARY KEY,
    template_id TEXT NOT NULL REFERENCES templates (id),
    number      INTEGER NOT NULL,
    archive     BYTEA NOT NULL,
    hash        TEXT NOT NULL,
    variables   TEXT NOT NULL DEFAULT '[]', -- a JSON array of names
    created_by  TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    UNIQUE (template_id, number)
);

ALTER TABLE templates ADD CONSTRAINT templates_active_version_id_fkey
    FOREIGN KEY (active_version_id) REFERENCES template_versions (id);

-- A terraform workspace has no agent (and so is never read by a reconcile, which selects by
-- agent_id); a kubernetes workspace always has one.
ALTER TABLE workspaces ALTER COLUMN agent_id DROP NOT NULL;
ALTER TABLE workspaces ADD COLUMN backend TEXT NOT NULL DEFAULT 'kubernetes';
ALTER TABLE workspaces ADD COLUMN template_id TEXT REFERENCES templates (id);
ALTER TABLE workspaces ADD CONSTRAINT workspaces_backend_agent
    CHECK (backend IN ('kubernetes', 'terraform') AND (backend = 'terraform') = (agent_id IS NULL));

CREATE TABLE workspace_builds (
    id                       TEXT PRIMARY KEY,
    workspace_id             TEXT NOT NULL REFERENCES workspaces (id),
    build_number             INTEGER NOT NULL,
    transition               TEXT NOT NULL,
    reason                   TEXT NOT NULL,
    initiator_id             TEXT NOT NULL REFERENCES users (id),
    template_version_id      TEXT NOT NULL REFERENCES template_versions (id),
    state                    BYTEA, -- the Terraform state; never logged
    state_source             TEXT NOT NULL,
    state_captured_on_cancel BOOLEAN NOT NULL DEFAULT FALSE,
    orphan                   BOOLEAN NOT NULL DEFAULT FALSE,
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
    id         BIGSERIAL PRIMARY KEY,
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
    token_hash   BYTEA NOT NULL UNIQUE,
    created_at   BIGINT NOT NULL,
    last_seen_at BIGINT
);

-- +goose Down
DROP TABLE provisioners;
DROP TABLE provisioner_job_logs;
DROP TABLE provisioner_jobs;
DROP TABLE workspace_builds;
DELETE FROM workspaces WHERE backend <> 'kubernetes';
ALTER TABLE workspaces DROP CONSTRAINT workspaces_backend_agent;
ALTER TABLE workspaces DROP COLUMN template_id;
ALTER TABLE workspaces DROP COLUMN backend;
ALTER TABLE workspaces ALTER COLUMN agent_id SET NOT NULL;
ALTER TABLE templates DROP CONSTRAINT templates_active_version_id_fkey;
DROP TABLE template_versions;
DROP TABLE templates;
