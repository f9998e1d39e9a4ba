-- name: MemberCreate :one
INSERT INTO members (workspace_id, id, email, approved, settings_access)
VALUES (@workspace_id, @id, @email, @approved, @settings_access)
RETURNING *;

-- name: MemberGet :one
SELECT * FROM members WHERE workspace_id = @workspace_id AND id = @id;

-- MemberGetByEmail finds the member a duplicate email collides with.
-- name: MemberGetByEmail :one
SELECT * FROM members WHERE workspace_id = @workspace_id AND email = @email;

-- MemberList pages through a workspace's members in id order (creation
-- order), those after after_id when it is given.
-- name: MemberList :many
SELECT * FROM members
WHERE workspace_id = @workspace_id
  AND id > coalesce(sqlc.narg(after_id)::uuid, '00000000-0000-0000-0000-000000000000'::uuid)
ORDER BY id
LIMIT @max_rows;

-- MemberSetSettingsAccess changes a member's settings access. It finds the
-- member by id alone (members_id): the operator names a member, and the
-- row says its workspace. It is the one statement on members that does
-- not filter on workspace_id, and an operator's, never a partner's.
-- name: MemberSetSettingsAccess :one
UPDATE members SET settings_access = @settings_access
WHERE id = @id
RETURNING *;
