-- +goose Up
-- Lifecycle automation (docs/decisions.md, "Lifecycle automation").
--
-- The automation's own user: builds and changes the lifecycle executor makes name it as their
-- initiator. It is a system user: no token can match its hash (one byte; tokens hash to 32), and
-- the store never returns it by token or by username, so nobody can sign in as it or give it a
-- token. Its name is taken, so no person can be called that.
ALTER TABLE users ADD COLUMN system BOOLEAN NOT NULL DEFAULT FALSE;
INSERT INTO users (id, username, admin, token_hash, created_at, system)
    VALUES ('00000000-0000-4000-8000-00000000a070', 'hangar-automation', TRUE, '\x00'::bytea, 0, TRUE);

-- A workspace's own settings, within its template's or agent's bounds: an autostart schedule (a
-- cron expression and an IANA time zone; '' is none) and a TTL (milliseconds; NULL takes the
-- default of its template or agent, 0 turns autostop off where allowed).
ALTER TABLE workspaces ADD COLUMN autostart_schedule TEXT NOT NULL DEFAULT '';
ALTER TABLE workspaces ADD COLUMN autostart_timezone TEXT NOT NULL DEFAULT '';
ALTER TABLE workspaces ADD COLUMN ttl_ms BIGINT;
-- When the workspace went dormant (no use for its dormancy threshold; NULL: it is not dormant).
ALTER TABLE workspaces ADD COLUMN dormant_at BIGINT;
-- Why the desired state is what it is: '' for a user's change, else the automation's reason.
ALTER TABLE workspaces ADD COLUMN desired_state_reason TEXT NOT NULL DEFAULT '';

-- A template's lifecycle policy (JSON, workspace.Lifecycle).
ALTER TABLE templates ADD COLUMN lifecycle TEXT NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE templates DROP COLUMN lifecycle;
ALTER TABLE workspaces DROP COLUMN desired_state_reason;
ALTER TABLE workspaces DROP COLUMN dormant_at;
ALTER TABLE workspaces DROP COLUMN ttl_ms;
ALTER TABLE workspaces DROP COLUMN autostart_timezone;
ALTER TABLE workspaces DROP COLUMN autostart_schedule;
DELETE FROM users WHERE system;
ALTER TABLE users DROP COLUMN system;
