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
-- than before_id when it is given (the last id of the previous page),
-- with the names beside the ids: the acting member's email, the
-- client's name and the email of the member acted on. Each filter is optional (NULL:
-- any): the action; the actor, a member (actor_member_id), an API client
-- acting with its own token (actor_client_id: no member, that client) or
-- the operator (operator_actor: no member, no client); the client acted
-- on or acting (client_id); reads, an action named "….list" (true: only
-- reads, false: only the rest). Run planned (db.PlannedTx), so that each
-- filter given folds into an index walk: audit_events_action,
-- audit_events_actor, audit_events_client, audit_events_changes or the
-- primary key (migration 00151, TestAuditEventListUsesIndexes).
-- name: AuditEventList :many
SELECT sqlc.embed(e), am.email AS actor_email, m.email AS member_email, c.name AS client_name
FROM audit_events AS e
LEFT JOIN members AS am ON am.workspace_id = e.workspace_id AND am.id = e.actor_member_id
LEFT JOIN members AS m ON m.workspace_id = e.workspace_id AND m.id = e.member_id
LEFT JOIN api_clients AS c ON c.workspace_id = e.workspace_id AND c.id = e.client_id
WHERE e.workspace_id = @workspace_id AND e.id < coalesce(sqlc.narg(before_id)::bigint, 9223372036854775807)
  AND (sqlc.narg(action)::text IS NULL OR e.action = sqlc.narg(action)::text)
  AND (sqlc.narg(actor_member_id)::uuid IS NULL OR e.actor_member_id = sqlc.narg(actor_member_id)::uuid)
  AND (sqlc.narg(actor_client_id)::uuid IS NULL OR (e.client_id = sqlc.narg(actor_client_id)::uuid AND e.actor_member_id IS NULL))
  AND (NOT @operator_actor::boolean OR (e.actor_member_id IS NULL AND e.client_id IS NULL))
  AND (sqlc.narg(client_id)::uuid IS NULL OR e.client_id = sqlc.narg(client_id)::uuid)
  AND (sqlc.narg(reads)::boolean IS NULL OR (sqlc.narg(reads)::boolean AND e.action LIKE '%.list')
       OR (NOT sqlc.narg(reads)::boolean AND e.action NOT LIKE '%.list'))
ORDER BY e.id DESC
LIMIT @max_rows;

-- AuditEventDeleteOld deletes at most max_rows events created before the
-- given time, oldest first.
-- name: AuditEventDeleteOld :execrows
DELETE FROM audit_events
WHERE (workspace_id, id) IN (SELECT o.workspace_id, o.id FROM audit_events AS o
                             WHERE o.created_at < @before::timestamptz ORDER BY o.created_at LIMIT @max_rows);
