-- name: IdempotencyDeleteExpired :execrows
DELETE FROM idempotency_keys WHERE created_at < @before;

-- IdempotencyClaim claims a key in a transaction (see idempotency_claim in
-- migration 00010) and returns the protobuf answer an earlier request
-- stored, or NULL. Batches use it with IdempotencySave; single creates
-- claim inside their own function.
-- name: IdempotencyClaim :one
SELECT k.response FROM idempotency_claim(@workspace_id, @client_id, @path, @key, @request_hash, @lock_key, @fresh_since) AS k;

-- name: IdempotencySave :exec
SELECT idempotency_save(@workspace_id, @client_id, @path, @key, @request_hash, NULL, @response);
