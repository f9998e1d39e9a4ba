-- Webhook secrets at rest (service/webhook/secrets): sealed by the binary
-- under PARTNER_SECRET_KEY; the text columns keep a plaintext copy for
-- release 1.1.0 only while webhook_secrets.plaintext_kept (migration
-- 00160).

-- WebhookSecretsToSeal are endpoints, after a place in (workspace, id)
-- order, whose secrets the sweep must seal: never sealed (made or rotated
-- by 1.1.0), sealed under a key other than key_id (the key was rotated),
-- or with a plaintext copy no longer kept. Locked, skipping endpoints
-- another replica's sweep or a rotation holds.
-- name: WebhookSecretsToSeal :many
SELECT w.workspace_id, w.id, w.secret, w.secret_sealed, w.previous_secret, w.previous_secret_sealed
FROM webhook_endpoints w
WHERE (w.workspace_id, w.id) > (@after_workspace::uuid, @after_id::uuid)
  AND (w.secret_sealed IS NULL OR substring(w.secret_sealed FROM 2 FOR 4) <> @key_id::bytea
       OR (w.previous_secret_sealed IS NULL AND coalesce(w.previous_secret, '') <> '')
       OR substring(w.previous_secret_sealed FROM 2 FOR 4) <> @key_id::bytea
       OR (NOT (SELECT s.plaintext_kept FROM webhook_secrets s) AND (w.secret <> '' OR coalesce(w.previous_secret, '') <> '')))
ORDER BY w.workspace_id, w.id
LIMIT @max_rows
FOR UPDATE SKIP LOCKED;

-- WebhookSecretsSeal stores an endpoint's secrets sealed afresh, and
-- empties their plaintext copies unless they are kept.
-- name: WebhookSecretsSeal :exec
UPDATE webhook_endpoints
SET secret_sealed = @secret_sealed, previous_secret_sealed = sqlc.narg(previous_secret_sealed),
    secret = CASE WHEN (SELECT s.plaintext_kept FROM webhook_secrets s) THEN secret ELSE '' END,
    previous_secret = CASE WHEN previous_secret IS NULL OR (SELECT s.plaintext_kept FROM webhook_secrets s) THEN previous_secret ELSE '' END
WHERE workspace_id = @workspace_id AND id = @id;

-- WebhookSecretsPlaintextKept is whether the text columns keep a plaintext
-- copy of each secret (for release 1.1.0).
-- name: WebhookSecretsPlaintextKept :one
SELECT plaintext_kept FROM webhook_secrets;

-- WebhookSecretsSealOnly stops keeping plaintext copies: the operator's
-- `partnerapi migrate --seal-webhook-secrets`, once no 1.1.0 replica
-- serves.
-- name: WebhookSecretsSealOnly :exec
UPDATE webhook_secrets SET plaintext_kept = false;

-- WebhookSecretsInClear counts the endpoints with a secret in the clear
-- (make test-upgrade checks there is none once plaintext copies are no
-- longer kept).
-- name: WebhookSecretsInClear :one
SELECT count(*) FROM webhook_endpoints WHERE secret <> '' OR coalesce(previous_secret, '') <> '';
