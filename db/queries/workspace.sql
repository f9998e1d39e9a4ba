-- name: WorkspaceCreate :one
INSERT INTO workspaces (id, name) VALUES (@id, @name)
RETURNING *;

-- name: WorkspaceGet :one
SELECT * FROM workspaces WHERE id = @id;

-- WorkspaceList pages through every workspace in id order, which is
-- creation order (ids are UUIDv7), those after after_id when it is given.
-- It serves operators (the admin API's caller) across workspaces.
-- name: WorkspaceList :many
SELECT * FROM workspaces
WHERE id > coalesce(sqlc.narg(after_id)::uuid, '00000000-0000-0000-0000-000000000000'::uuid)
ORDER BY id
LIMIT @max_rows;
