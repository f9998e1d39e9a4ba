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

-- IdempotencyErase deletes the stored answers of the workspace that hold
-- a deleted record (erasure): a stored row (record) of it or naming it as
-- its contact, or a stored protobuf answer (response) in which its opaque
-- id appears. It scans the workspace's stored answers, which the sweep
-- keeps to the replay window; deletes are rare next to creates.
-- name: IdempotencyErase :execrows
DELETE FROM idempotency_keys
WHERE workspace_id = @workspace_id
  AND ((record ->> 'id')::uuid = ANY (@ids::uuid[])
       OR (record ->> 'contact_id')::uuid = ANY (@ids::uuid[])
       OR EXISTS (SELECT 1 FROM unnest(@opaque_ids::text[]) AS o
                  WHERE position(convert_to(o, 'UTF8') IN response) > 0));

-- IdempotencyEraseText deletes the stored answers of the workspace that
-- hold text of a record being erased other than its id: a lead titled
-- after an erased contact (erased_title), in its stored row or its stored
-- protobuf answer.
-- name: IdempotencyEraseText :execrows
DELETE FROM idempotency_keys
WHERE workspace_id = @workspace_id
  AND (record ->> 'title' = @erased_title::text
       OR position(convert_to(@erased_title::text, 'UTF8') IN response) > 0);
