-- name: WorkspaceCreate :one
INSERT INTO workspaces (id, name) VALUES (@id, @name)
RETURNING *;

-- name: WorkspaceGet :one
SELECT * FROM workspaces WHERE id = @id;
