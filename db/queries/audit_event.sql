-- AuditEventCreate records an action. A NULL actor is the operator (the
-- admin API's caller); member_id names the member acted on, if any.
-- name: AuditEventCreate :exec
INSERT INTO audit_events (workspace_id, actor_member_id, action, client_id, member_id)
VALUES (@workspace_id, sqlc.narg(actor_member_id), @action, sqlc.narg(client_id), sqlc.narg(member_id));

-- name: AuditEventList :many
SELECT * FROM audit_events WHERE workspace_id = @workspace_id
ORDER BY id DESC
LIMIT @max_rows;

-- AuditEventDeleteOld deletes at most max_rows events created before the
-- given time, oldest first.
-- name: AuditEventDeleteOld :execrows
DELETE FROM audit_events
WHERE (workspace_id, id) IN (SELECT o.workspace_id, o.id FROM audit_events AS o
                             WHERE o.created_at < @before::timestamptz ORDER BY o.created_at LIMIT @max_rows);
