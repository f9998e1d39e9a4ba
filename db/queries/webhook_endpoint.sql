-- Webhook endpoints as their owning API client manages them
-- (service/webhook). Every query is scoped by workspace and client: another
-- client's endpoint is not found.

-- WebhookEndpointLockClient serialises the endpoint creates of one client
-- until the transaction ends, so that the per-client cap holds under
-- concurrent creates without locking the api_clients row (which token
-- issuance and the foreign key of the insert touch).
-- name: WebhookEndpointLockClient :exec
SELECT pg_advisory_xact_lock(hashtextextended('webhook_endpoints:' || (@client_id::uuid)::text, 0));

-- WebhookEndpointCount counts a client's endpoints.
-- name: WebhookEndpointCount :one
SELECT count(*) FROM webhook_endpoints WHERE workspace_id = @workspace_id AND client_id = @client_id;

-- WebhookEndpointCreate inserts an endpoint at the given place in the
-- feed, its secret sealed, and in the clear too only while plaintext
-- copies are kept for release 1.1.0 (webhook_secrets).
-- name: WebhookEndpointCreate :one
INSERT INTO webhook_endpoints (workspace_id, id, client_id, url, event_types, description, secret, secret_sealed, after_xid, after_seq)
VALUES (@workspace_id, @id, @client_id, @url, @event_types::text[], @description,
        CASE WHEN (SELECT s.plaintext_kept FROM webhook_secrets s) THEN @secret::text ELSE '' END, @secret_sealed::bytea,
        @after_xid, @after_seq)
RETURNING *;

-- WebhookEndpointList lists a client's endpoints, oldest first.
-- name: WebhookEndpointList :many
SELECT * FROM webhook_endpoints
WHERE workspace_id = @workspace_id AND client_id = @client_id
ORDER BY created_at, id;

-- WebhookEndpointGet reads one of a client's endpoints.
-- name: WebhookEndpointGet :one
SELECT * FROM webhook_endpoints WHERE workspace_id = @workspace_id AND client_id = @client_id AND id = @id;

-- WebhookEndpointGetForUpdate reads one of a client's endpoints and locks
-- it until the transaction ends (an update, a rotation, a replay).
-- name: WebhookEndpointGetForUpdate :one
SELECT * FROM webhook_endpoints WHERE workspace_id = @workspace_id AND client_id = @client_id AND id = @id
FOR UPDATE;

-- WebhookEndpointUpdate writes the members an update may change.
-- name: WebhookEndpointUpdate :one
UPDATE webhook_endpoints
SET url = @url, event_types = @event_types::text[], description = @description, status = @status,
    disabled_reason = sqlc.narg(disabled_reason), updated_at = now()
WHERE workspace_id = @workspace_id AND client_id = @client_id AND id = @id
RETURNING *;

-- WebhookEndpointRotateSecret makes the current secret the previous one,
-- signing until previous_expires_at (none when that is NULL: the current
-- secret retires at once), and sets a new one, sealed (and in the clear
-- only while plaintext copies are kept, as WebhookEndpointCreate).
-- name: WebhookEndpointRotateSecret :one
UPDATE webhook_endpoints
SET previous_secret = CASE WHEN sqlc.narg(previous_expires_at)::timestamptz IS NOT NULL THEN secret END,
    previous_secret_sealed = CASE WHEN sqlc.narg(previous_expires_at)::timestamptz IS NOT NULL THEN secret_sealed END,
    previous_expires_at = sqlc.narg(previous_expires_at)::timestamptz,
    secret = CASE WHEN (SELECT s.plaintext_kept FROM webhook_secrets s) THEN @secret::text ELSE '' END,
    secret_sealed = @secret_sealed::bytea, updated_at = now()
WHERE workspace_id = @workspace_id AND client_id = @client_id AND id = @id
RETURNING *;

-- WebhookEndpointDelete deletes one of a client's endpoints with its
-- deliveries and attempts (ON DELETE CASCADE).
-- name: WebhookEndpointDelete :execrows
DELETE FROM webhook_endpoints WHERE workspace_id = @workspace_id AND client_id = @client_id AND id = @id;

-- WebhookAttemptList lists an endpoint's delivery attempts newest first,
-- those below before_id when it is given (the last id of the previous
-- page).
-- name: WebhookAttemptList :many
SELECT * FROM webhook_attempts
WHERE workspace_id = @workspace_id AND endpoint_id = @endpoint_id
  AND id < coalesce(sqlc.narg(before_id)::bigint, 9223372036854775807)
ORDER BY id DESC
LIMIT @max_rows;
