-- +goose Up
-- Tokens of the helpers of Terraform workspaces (docs/decisions.md, "Terraform workspaces: the
-- helper connects out"). The server mints one for every build it hands to a provisioner; the
-- template's hangar_agent resource takes it, and the helper the machine runs connects out to the
-- server with it. Only the SHA-256 of a token is kept. A row is the token of one build of one
-- workspace; when a build finishes, the rows of that build and older ones whose token is not in
-- the Terraform state the build recorded are removed, so that only the tokens of the agents that
-- exist (and of the builds still running) work. Unix microseconds, like every time of the schema.
CREATE TABLE workspace_agent_tokens (
    token_hash   BYTEA PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    build_number INTEGER NOT NULL,
    created_at   BIGINT NOT NULL
);
CREATE INDEX workspace_agent_tokens_workspace ON workspace_agent_tokens (workspace_id, build_number);

-- +goose Down
DROP TABLE workspace_agent_tokens;
