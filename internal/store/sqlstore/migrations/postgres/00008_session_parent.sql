-- +goose Up
-- A one-time code and the workspace session it becomes remember the server session (the browser's
-- sign-in) they came from, so that signing out ends them too (docs/decisions.md, "Signing out ends
-- the workspace sessions"). NULL: none (rows from before, server sessions).
ALTER TABLE sessions ADD COLUMN parent_hash BYTEA;
CREATE INDEX sessions_parent_hash ON sessions (parent_hash);

-- +goose Down
DROP INDEX sessions_parent_hash;
ALTER TABLE sessions DROP COLUMN parent_hash;
