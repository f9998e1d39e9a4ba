-- IdempotencyTryLock takes a transaction-scoped advisory lock on one
-- idempotency key. False means another request with the key is in flight.
-- name: IdempotencyTryLock :one
SELECT pg_try_advisory_xact_lock(@lock_key::bigint) AS locked;

-- name: IdempotencyGet :one
SELECT request_hash, response, created_at FROM idempotency_keys
WHERE workspace_id = @workspace_id AND client_id = @client_id AND path = @path AND key = @key;

-- IdempotencySave stores a response. An expired row under the same key is
-- replaced.
-- name: IdempotencySave :exec
INSERT INTO idempotency_keys (workspace_id, client_id, path, key, request_hash, response)
VALUES (@workspace_id, @client_id, @path, @key, @request_hash, @response)
ON CONFLICT (workspace_id, client_id, path, key) DO UPDATE
SET request_hash = EXCLUDED.request_hash, response = EXCLUDED.response, created_at = now();

-- name: IdempotencyDeleteExpired :execrows
DELETE FROM idempotency_keys WHERE created_at < @before;
