-- +goose Up
-- The audit log (docs/decisions.md, "The audit log"): who did what to which object, when, and how
-- it ended. Rows are written in the transaction of the action they record where the action has
-- one; the server prunes rows older than --audit-retention. Names are copied, not referenced: an
-- entry outlives what it names. details is a JSON object (never a secret or a Terraform state).
CREATE TABLE audit_log (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at  BIGINT NOT NULL,
    actor_id    TEXT NOT NULL,
    actor_name  TEXT NOT NULL,
    action      TEXT NOT NULL,
    target_kind TEXT NOT NULL,
    target_id   TEXT NOT NULL,
    target_name TEXT NOT NULL,
    outcome     TEXT NOT NULL CHECK (outcome IN ('success', 'failure')),
    error       TEXT NOT NULL,
    details     TEXT NOT NULL DEFAULT '{}'
);
-- The prune's and the time filters' order.
CREATE INDEX audit_log_created_at ON audit_log (created_at);
CREATE INDEX audit_log_actor ON audit_log (actor_name, id);
CREATE INDEX audit_log_target ON audit_log (target_name, id);

-- A build's Terraform log level: '' (info) or 'debug' (TF_LOG=DEBUG for that build only).
ALTER TABLE workspace_builds ADD COLUMN log_level TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE workspace_builds DROP COLUMN log_level;
DROP TABLE audit_log;
