-- Webhook endpoints as a workspace's administrators see them (the admin
-- RPCs ListWebhookEndpoints and DisableWebhookEndpoint, service/admin).
-- Every query is scoped by workspace, and none returns a secret: the
-- columns are named, not *.

-- WebhookAdminList lists a workspace's endpoints, of one client when
-- client_id is given, oldest first.
-- name: WebhookAdminList :many
SELECT workspace_id, id, client_id, url, event_types, description, status, disabled_reason,
       created_at, updated_at, last_success_at
FROM webhook_endpoints
WHERE workspace_id = @workspace_id
  AND (sqlc.narg(client_id)::uuid IS NULL OR client_id = sqlc.narg(client_id)::uuid)
ORDER BY created_at, id;

-- WebhookAdminDisable disables one of a workspace's endpoints (of one
-- client when client_id is given) for an administrator: reason 'admin',
-- which the client cannot undo, except that a revoked client's endpoint
-- keeps 'client_revoked' (that is final). No row: there is no such
-- endpoint.
-- name: WebhookAdminDisable :one
UPDATE webhook_endpoints
SET status = 'disabled',
    disabled_reason = CASE WHEN disabled_reason = 'client_revoked' THEN disabled_reason ELSE 'admin' END,
    updated_at = now()
WHERE workspace_id = @workspace_id AND id = @id
  AND (sqlc.narg(client_id)::uuid IS NULL OR client_id = sqlc.narg(client_id)::uuid)
RETURNING workspace_id, id, client_id, url, event_types, description, status, disabled_reason,
          created_at, updated_at, last_success_at;

-- WebhookAdminDisableForCredentials disables every endpoint of a client
-- whose credentials a member ended because they may have leaked
-- (RotateApiClientSecret and DeactivateApiClient with disable_webhooks),
-- in that change's transaction: reason 'credentials_revoked', which the
-- client cannot undo, so an endpoint made with a leaked secret stops
-- receiving. An endpoint already out of the client's reach ('admin',
-- 'client_revoked', or this reason) keeps its reason. The answer is how
-- many it disabled.
-- name: WebhookAdminDisableForCredentials :execrows
UPDATE webhook_endpoints
SET status = 'disabled', disabled_reason = 'credentials_revoked', updated_at = now()
WHERE workspace_id = @workspace_id AND client_id = @client_id
  AND (disabled_reason IS NULL OR disabled_reason NOT IN ('admin', 'client_revoked', 'credentials_revoked'));

-- WebhookAdminGetForUpdate reads one of a workspace's endpoints (of one
-- client when client_id is given) and locks it until the transaction
-- ends: an administrator's enable decides on its disabled reason.
-- name: WebhookAdminGetForUpdate :one
SELECT workspace_id, id, client_id, url, event_types, description, status, disabled_reason,
       created_at, updated_at, last_success_at
FROM webhook_endpoints
WHERE workspace_id = @workspace_id AND id = @id
  AND (sqlc.narg(client_id)::uuid IS NULL OR client_id = sqlc.narg(client_id)::uuid)
FOR UPDATE;

-- WebhookAdminEnable enables one of a workspace's endpoints for an
-- administrator (service/admin decides which reasons allow it, and makes
-- its deliveries due again in the same transaction).
-- name: WebhookAdminEnable :one
UPDATE webhook_endpoints
SET status = 'enabled', disabled_reason = NULL, updated_at = now()
WHERE workspace_id = @workspace_id AND id = @id
RETURNING workspace_id, id, client_id, url, event_types, description, status, disabled_reason,
          created_at, updated_at, last_success_at;

-- WebhookAdminHealth is the health of some of a workspace's endpoints, as
-- the settings page shows it: the last success, and the pending
-- deliveries counted up to max_pending (a larger backlog reads as
-- max_pending), one endpoint's range of webhook_deliveries_record
-- (pending only) each.
-- name: WebhookAdminHealth :many
SELECT w.id, w.last_success_at,
       (SELECT count(*) FROM (SELECT 1 FROM webhook_deliveries d
                              WHERE d.workspace_id = w.workspace_id AND d.endpoint_id = w.id AND d.status = 'pending'
                              LIMIT @max_pending::bigint) AS p) AS pending
FROM webhook_endpoints w
WHERE w.workspace_id = @workspace_id AND w.id = ANY (@ids::uuid[]);

-- WebhookAdminFailingSince says since when some of a workspace's
-- endpoints have been failing: for each whose newest attempt failed, its
-- first failed attempt after its last success (within the delivery log
-- kept). An endpoint whose newest attempt succeeded, or with none, has no
-- row. Both reads are one endpoint's range of webhook_attempts_endpoint_at:
-- the newest entry, then the first failure after the success.
-- name: WebhookAdminFailingSince :many
SELECT w.id, fs.at AS failing_since
FROM webhook_endpoints w
CROSS JOIN LATERAL (
    SELECT f.at FROM webhook_attempts f
    WHERE f.workspace_id = w.workspace_id AND f.endpoint_id = w.id AND f.status = 'failed'
      AND f.at > coalesce(w.last_success_at, '-infinity'::timestamptz)
    ORDER BY f.at LIMIT 1
) AS fs
WHERE w.workspace_id = @workspace_id AND w.id = ANY (@ids::uuid[])
  AND (SELECT n.status FROM webhook_attempts n
       WHERE n.workspace_id = w.workspace_id AND n.endpoint_id = w.id
       ORDER BY n.at DESC LIMIT 1) = 'failed';

-- WebhookAdminAttemptHours counts some of a workspace's endpoints'
-- succeeded and failed attempts per hour from since (an hour boundary) to
-- until, for the settings page's 24-hour chart: hours without an attempt
-- have no row. It reads each endpoint's range of
-- webhook_attempts_endpoint_at, index only.
-- name: WebhookAdminAttemptHours :many
SELECT a.endpoint_id, date_bin('1 hour', a.at, @since::timestamptz)::timestamptz AS hour,
       count(*) FILTER (WHERE a.status = 'succeeded') AS succeeded,
       count(*) FILTER (WHERE a.status = 'failed') AS failed
FROM webhook_attempts a
WHERE a.workspace_id = @workspace_id AND a.endpoint_id = ANY (@ids::uuid[])
  AND a.at >= @since::timestamptz AND a.at < @until::timestamptz
GROUP BY a.endpoint_id, hour;
