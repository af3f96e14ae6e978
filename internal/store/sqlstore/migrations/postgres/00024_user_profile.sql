-- +goose Up
-- A user's profile (docs/decisions.md, "A team's repository: dotfiles and identity (issue 22)"):
-- the full name and email a workspace's git commits carry, and the dotfiles repository its helper
-- installs at the first start ('' for none). full_name_set and email_set say the user set that
-- field themselves (PATCH /api/v1/users/me): an OIDC sign-in then leaves it; otherwise each
-- sign-in copies the provider's claim into it.
ALTER TABLE users ADD COLUMN full_name TEXT NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN email TEXT NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN dotfiles_repo TEXT NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN full_name_set BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE users ADD COLUMN email_set BOOLEAN NOT NULL DEFAULT FALSE;

-- +goose Down
ALTER TABLE users DROP COLUMN email_set;
ALTER TABLE users DROP COLUMN full_name_set;
ALTER TABLE users DROP COLUMN dotfiles_repo;
ALTER TABLE users DROP COLUMN email;
ALTER TABLE users DROP COLUMN full_name;
