-- +goose Up
-- The URL other server replicas reach the replica holding a Terraform workspace's helper by, to
-- relay users' connections to it (docs/decisions.md, "Relaying between replicas"); '' when that
-- replica takes no relayed connections.
ALTER TABLE workspace_agent_connections ADD COLUMN relay_url TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE workspace_agent_connections DROP COLUMN relay_url;
