-- Custom field definitions (internal/records/customfield). Every query is
-- scoped by workspace.

-- CustomFieldsLive are the workspace's definitions of one object that are
-- not deleted, oldest first: what values are checked against and answered
-- with.
-- name: CustomFieldsLive :many
SELECT * FROM custom_fields
WHERE workspace_id = @workspace_id AND object = @object AND deleted_at IS NULL
ORDER BY created_at, id;

-- CustomFieldCreate inserts a definition; a key in use (also a deleted
-- field's until its values are erased) is the unique violation of
-- custom_fields_key.
-- name: CustomFieldCreate :one
INSERT INTO custom_fields (workspace_id, id, object, key, label, type, options, required, description)
VALUES (@workspace_id, @id, @object, @key, @label, @type, sqlc.narg(options), @required, sqlc.narg(description))
RETURNING *;
