-- +goose Up
-- Sign-in with OIDC (docs/decisions.md, "Sign-in with OIDC"): a user created by a first sign-in is
-- linked to its identity at the provider by (issuer, subject), never by email alone (an email can
-- change hands; a subject is the provider's stable name for one account). email is the last one
-- the provider gave, for people to read. The user row itself is a plain user (migration 1) whose
-- token hash is a random one nobody knows.
CREATE TABLE oidc_identities (
    issuer         TEXT NOT NULL,
    subject        TEXT NOT NULL,
    user_id        TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    email          TEXT NOT NULL DEFAULT '',
    created_at     BIGINT NOT NULL,
    last_signin_at BIGINT NOT NULL,
    PRIMARY KEY (issuer, subject)
);
CREATE INDEX oidc_identities_user_id ON oidc_identities (user_id);

-- +goose Down
DROP TABLE oidc_identities;
