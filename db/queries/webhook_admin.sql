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
