-- +goose Up
-- The live workspace list (docs/decisions.md, "The live workspace stream"): every change of what
-- the list shows (created; desired or actual state, error, schedule, owner, version changed) gives
-- the row the next change_seq, in the writing transaction, whatever code path wrote it. SQLite
-- serializes writers, so sequence order is commit order: a reader that saw every change up to N
-- reads the next ones with change_seq > N (the index), never the whole table.
ALTER TABLE workspaces ADD COLUMN change_seq BIGINT NOT NULL DEFAULT 0;
UPDATE workspaces SET change_seq = rowid;
CREATE INDEX workspaces_change_seq ON workspaces (change_seq);

-- +goose StatementBegin
CREATE TRIGGER workspaces_changed_insert AFTER INSERT ON workspaces
BEGIN
    UPDATE workspaces SET change_seq = (SELECT COALESCE(MAX(change_seq), 0) + 1 FROM workspaces) WHERE id = NEW.id;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER workspaces_changed_update AFTER UPDATE OF desired_state, actual_state, error_type, error_message, url,
    autostart_schedule, autostart_timezone, ttl_ms, dormant_at, desired_state_reason, owner_id, name, template_version_id, parameters
    ON workspaces
    WHEN OLD.desired_state IS NOT NEW.desired_state OR OLD.actual_state IS NOT NEW.actual_state
        OR OLD.desired_state_updated_at IS NOT NEW.desired_state_updated_at
        OR OLD.error_type IS NOT NEW.error_type OR OLD.error_message IS NOT NEW.error_message OR OLD.url IS NOT NEW.url
        OR OLD.autostart_schedule IS NOT NEW.autostart_schedule OR OLD.autostart_timezone IS NOT NEW.autostart_timezone
        OR OLD.ttl_ms IS NOT NEW.ttl_ms OR OLD.dormant_at IS NOT NEW.dormant_at OR OLD.desired_state_reason IS NOT NEW.desired_state_reason
        OR OLD.owner_id IS NOT NEW.owner_id OR OLD.name IS NOT NEW.name
        OR OLD.template_version_id IS NOT NEW.template_version_id OR OLD.parameters IS NOT NEW.parameters
BEGIN
    UPDATE workspaces SET change_seq = (SELECT COALESCE(MAX(change_seq), 0) + 1 FROM workspaces) WHERE id = NEW.id;
END;
-- +goose StatementEnd

-- When each agent last called the server (reconcile or wait), written at most every 30 s per agent
-- and replica: the admin's agents page says connected or not, and since when.
ALTER TABLE agents ADD COLUMN last_seen_at BIGINT;

-- +goose Down
ALTER TABLE agents DROP COLUMN last_seen_at;
DROP TRIGGER workspaces_changed_update;
DROP TRIGGER workspaces_changed_insert;
DROP INDEX workspaces_change_seq;
ALTER TABLE workspaces DROP COLUMN change_seq;
