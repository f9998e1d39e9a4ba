-- name: AuditEventCreate :exec
INSERT INTO audit_events (workspace_id, actor_member_id, action, client_id)
VALUES (@workspace_id, @actor_member_id, @action, @client_id);

-- name: AuditEventList :many
SELECT * FROM audit_events WHERE workspace_id = @workspace_id
ORDER BY id DESC
LIMIT @max_rows;
