-- AuthFeedListen subscribes a listening session to the token caches'
-- invalidation feed (internal/security/auth): the triggers of migration 00002 notify
-- on the channel partner_auth, and replicas send their heartbeats,
-- barriers and acknowledgements through it.
-- name: AuthFeedListen :exec
LISTEN partner_auth;

-- AuthFeedNotify sends one message on the feed. NOTIFY is transactional:
-- listeners receive it when it commits, in commit order.
-- name: AuthFeedNotify :exec
SELECT pg_notify('partner_auth', @payload::text);
