-- AuditEventCreate records an action. A NULL actor is the operator (the
-- admin API's caller); member_id names the member acted on, if any. An
-- API client's own action (a webhook endpoint's create or change) names
-- the token it used (token_hash_prefix: the first 16 hex digits of its
-- SHA-256, never the token) and the request's source address.
-- name: AuditEventCreate :exec
INSERT INTO audit_events (workspace_id, actor_member_id, action, client_id, member_id, target_id,
                          token_hash_prefix, source_address)
VALUES (@workspace_id, sqlc.narg(actor_member_id), @action, sqlc.narg(client_id), sqlc.narg(member_id), sqlc.narg(target_id),
        sqlc.narg(token_hash_prefix), sqlc.narg(source_address));

-- AuditEventCreateRefused records a refused management attempt. It runs
-- on its own, after the attempt's transaction rolled back, so that the
-- refusal is kept. The workspace is the one acted on, which may not be the
-- actor's own (a member of another workspace); an attempt on a workspace
-- that does not exist is not recorded (there is no log to put it in), so
-- it answers 0 rows. Every value is an id, the action or a reason code
-- the service chose, never the caller's text.
-- name: AuditEventCreateRefused :execrows
INSERT INTO audit_events (workspace_id, actor_member_id, action, client_id, member_id, outcome, reason)
SELECT w.id, sqlc.narg(actor_member_id)::uuid, @action::text, sqlc.narg(client_id)::uuid, sqlc.narg(member_id)::uuid,
       'refused', @reason::text
FROM workspaces AS w WHERE w.id = @workspace_id;

-- AuditEventList lists a workspace's events newest first, those older
-- than before_id when it is given (the last id of the previous page).
-- name: AuditEventList :many
SELECT * FROM audit_events
WHERE workspace_id = @workspace_id AND id < coalesce(sqlc.narg(before_id)::bigint, 9223372036854775807)
ORDER BY id DESC
LIMIT @max_rows;

-- AuditEventDeleteOld deletes at most max_rows events created before the
-- given time, oldest first.
-- name: AuditEventDeleteOld :execrows
DELETE FROM audit_events
WHERE (workspace_id, id) IN (SELECT o.workspace_id, o.id FROM audit_events AS o
                             WHERE o.created_at < @before::timestamptz ORDER BY o.created_at LIMIT @max_rows);
