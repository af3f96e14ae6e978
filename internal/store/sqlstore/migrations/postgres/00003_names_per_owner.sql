-- +goose Up
-- Workspace names are unique per owner among the workspaces that are not Terminated (a name is free
-- again once its workspace is), and each workspace gets a cluster name (kube_name), unique forever:
-- the name of its Kubernetes objects and, in a namespace of its own, of that namespace after
-- "hangar-" (docs/decisions.md, "Workspace names, cluster names and URLs"). Rows from before keep
-- their objects and namespace: their cluster name is their name, which was unique on the server.
-- Their URL moves to the new scheme https://<port>-<name>--<owner>.<zone>/ (no proxy served the
-- old one); a workspace whose name or owner contains "--", or whose two names do not fit one
-- 63-character label, is left without a URL.
ALTER TABLE workspaces DROP CONSTRAINT workspaces_name_key;
ALTER TABLE workspaces ADD COLUMN kube_name TEXT;
UPDATE workspaces SET kube_name = name;
ALTER TABLE workspaces ALTER COLUMN kube_name SET NOT NULL;
ALTER TABLE workspaces ADD CONSTRAINT workspaces_kube_name_key UNIQUE (kube_name);

UPDATE workspaces w SET url = CASE
        WHEN w.url LIKE 'https://%' AND strpos(w.url, '.') > 0 AND w.name NOT LIKE '%--%' AND u.username NOT LIKE '%--%'
            AND length(w.name) + length(u.username) <= 55
        THEN substr(w.url, 1, strpos(w.url, '.') - 1) || '--' || u.username || substr(w.url, strpos(w.url, '.'))
        ELSE ''
    END
FROM users u WHERE u.id = w.owner_id AND w.url <> '';

-- One workspace of a name per owner, Terminated ones aside.
CREATE UNIQUE INDEX workspaces_owner_name ON workspaces (owner_id, name) WHERE actual_state <> 'Terminated';

-- +goose Down
-- Names become unique on the server again: this fails if two owners share one.
DROP INDEX workspaces_owner_name;
ALTER TABLE workspaces DROP CONSTRAINT workspaces_kube_name_key;
ALTER TABLE workspaces DROP COLUMN kube_name;
ALTER TABLE workspaces ADD CONSTRAINT workspaces_name_key UNIQUE (name);
