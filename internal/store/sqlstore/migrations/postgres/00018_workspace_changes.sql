-- +goose Up
-- The live workspace list (docs/decisions.md, "The live workspace stream"): every change of what
-- the list shows (created; desired or actual state, error, schedule, owner, version changed) stamps
-- the row with its writing transaction's id (change_xid), whatever code path wrote it, and sends
-- NOTIFY 'workspaces' on the store's channel (once per transaction: Postgres folds equal
-- notifications), so the streams of every replica look. Transactions commit out of id order, so a
-- reader keeps a snapshot (pg_current_snapshot) rather than a number: the next read returns the
-- rows whose change_xid that snapshot did not see (from its xmin on, through the index).
ALTER TABLE workspaces ADD COLUMN change_xid xid8 NOT NULL DEFAULT '0'::xid8;
CREATE INDEX workspaces_change_xid ON workspaces (change_xid);

-- +goose StatementBegin
CREATE FUNCTION workspaces_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.change_xid := pg_current_xact_id();
    PERFORM pg_notify('hangar_agent_changes', 'workspaces');
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER workspaces_changed_insert BEFORE INSERT ON workspaces
    FOR EACH ROW EXECUTE FUNCTION workspaces_changed();

CREATE TRIGGER workspaces_changed_update BEFORE UPDATE ON workspaces
    FOR EACH ROW WHEN (OLD.desired_state IS DISTINCT FROM NEW.desired_state OR OLD.actual_state IS DISTINCT FROM NEW.actual_state
        OR OLD.desired_state_updated_at IS DISTINCT FROM NEW.desired_state_updated_at
        OR OLD.error_type IS DISTINCT FROM NEW.error_type OR OLD.error_message IS DISTINCT FROM NEW.error_message OR OLD.url IS DISTINCT FROM NEW.url
        OR OLD.autostart_schedule IS DISTINCT FROM NEW.autostart_schedule OR OLD.autostart_timezone IS DISTINCT FROM NEW.autostart_timezone
        OR OLD.ttl_ms IS DISTINCT FROM NEW.ttl_ms OR OLD.dormant_at IS DISTINCT FROM NEW.dormant_at
        OR OLD.desired_state_reason IS DISTINCT FROM NEW.desired_state_reason
        OR OLD.owner_id IS DISTINCT FROM NEW.owner_id OR OLD.name IS DISTINCT FROM NEW.name
        OR OLD.template_version_id IS DISTINCT FROM NEW.template_version_id OR OLD.parameters IS DISTINCT FROM NEW.parameters)
    EXECUTE FUNCTION workspaces_changed();

-- When each agent last called the server (reconcile or wait), written at most every 30 s per agent
-- and replica: the admin's agents page says connected or not, and since when.
ALTER TABLE agents ADD COLUMN last_seen_at BIGINT;

-- +goose Down
ALTER TABLE agents DROP COLUMN last_seen_at;
DROP TRIGGER workspaces_changed_update ON workspaces;
DROP TRIGGER workspaces_changed_insert ON workspaces;
DROP FUNCTION workspaces_changed();
DROP INDEX workspaces_change_xid;
ALTER TABLE workspaces DROP COLUMN change_xid;
