-- name: IdempotencyDeleteExpired :execrows
DELETE FROM idempotency_keys WHERE created_at < @before;
