-- +goose Up
-- External auth (docs/decisions.md, "Forge identities: external auth (issue 22)"): a user's link to
-- an account at a forge configured by the admin (provider_id is the config's id, not a foreign
-- key: the forges live in the server's config). The tokens are sealed with AES-256-GCM under the
-- key key_id names (internal/externalauth); a row never holds a token in the clear. version is
-- bumped by every write so that two replicas refreshing at once compare-and-swap: the loser
-- re-reads and uses the winner's token (a used refresh token is dead at the forge). A refresh is
-- claimed first (refresh_claimed_until, by compare-and-swap) so that only one replica sends a
-- refresh token to the forge; the others wait for its result or for the claim to lapse.
CREATE TABLE external_auth_links (
    user_id         TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    provider_id     TEXT NOT NULL,
    key_id          TEXT NOT NULL,
    access_token    BYTEA NOT NULL,
    refresh_token   BYTEA,
    expires_at      BIGINT,
    account_login   TEXT NOT NULL DEFAULT '',
    account_email   TEXT NOT NULL DEFAULT '',
    linked_at       BIGINT NOT NULL,
    refreshed_at    BIGINT,
    refresh_error   TEXT NOT NULL DEFAULT '',
    relink_reason   TEXT NOT NULL DEFAULT '',
    refresh_claimed_until BIGINT,
    version         BIGINT NOT NULL,
    PRIMARY KEY (user_id, provider_id)
);

-- A link in progress: the browser went to the forge with a state whose SHA-256 is state_hash;
-- the callback takes the row once (single use), before expires_at, for the user who began it.
CREATE TABLE external_auth_states (
    state_hash    BYTEA PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    provider_id   TEXT NOT NULL,
    code_verifier TEXT NOT NULL,
    expires_at    BIGINT NOT NULL
);
CREATE INDEX external_auth_states_expires_at ON external_auth_states (expires_at);

-- +goose Down
DROP TABLE external_auth_states;
DROP TABLE external_auth_links;
