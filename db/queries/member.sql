-- name: MemberCreate :one
INSERT INTO members (workspace_id, id, email, approved, settings_access)
VALUES (@workspace_id, @id, @email, @approved, @settings_access)
RETURNING *;

-- name: MemberGet :one
SELECT * FROM members WHERE workspace_id = @workspace_id AND id = @id;
