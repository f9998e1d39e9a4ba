-- WebhookStart is the feed position of a new endpoint: every event of a
-- transaction older than the watermark is behind it, every later one
-- after it.
-- name: WebhookStart :one
SELECT (partner_sync_horizon() - 1)::bigint AS after_xid, 9223372036854775807::bigint AS after_seq;

-- WebhookFanout moves the feed into deliveries (webhook_fanout) and says
-- how many it made, or -1 when no endpoint is enabled at all: the engine
-- then rests its fan-outs a while (delivery.Engine), since the writes that
-- wake it have nowhere to go. The check reads the endpoint table; the
-- fan-out it spares takes a snapshot and a locking scan of the endpoints
-- (about 0.25 ms, up to 50 times a second while writes flow).
-- name: WebhookFanout :one
SELECT (CASE WHEN EXISTS (SELECT 1 FROM webhook_endpoints WHERE status = 'enabled')
             THEN webhook_fanout(@max_endpoints::int, @max_events::int) ELSE -1 END)::int AS moved;

-- WebhookDeliveriesAnalyze refreshes the delivery table's statistics
-- after a fan-out has filled it (a backlog moves thousands of events in a
-- second; autovacuum analyses a minute later at best, and until then the
-- claim is planned for the table as it was, often empty).
-- name: WebhookDeliveriesAnalyze :exec
ANALYZE webhook_deliveries;

-- name: WebhookClaim :many
SELECT * FROM webhook_claim(@lease_ms::int, @per_endpoint::int, @max_rows::int);

-- WebhookNextDue is when the next pending delivery falls due (the
-- engine's wake-up when no write wakes it first; leases that run out are
-- looked at a lease apart): the first of each endpoint's, each read from
-- the index of its due deliveries (migration 00111).
-- name: WebhookNextDue :one
SELECT coalesce((SELECT min(x.next_attempt_at) FROM webhook_endpoints w
                 CROSS JOIN LATERAL (SELECT d.next_attempt_at FROM webhook_deliveries d
                                     WHERE d.workspace_id = w.workspace_id AND d.endpoint_id = w.id
                                       AND d.status = 'pending'
                                     ORDER BY d.next_attempt_at LIMIT 1) x),
                now() + interval '1 hour')::timestamptz AS due;

-- WebhookReplay makes the endpoint's deliveries of the events after
-- (after_xid, after_seq), up to its place in the feed, due again: made
-- anew for those it has none of any more, restarted for the others.
-- name: WebhookReplay :execrows
INSERT INTO webhook_deliveries (workspace_id, endpoint_id, event_xid, event_seq, event_id, event_type, record_id)
SELECT w.workspace_id, w.id, e.change_xid, e.seq, e.id, e.type, e.record_id
FROM webhook_endpoints w
JOIN events e ON e.workspace_id = w.workspace_id
             AND (e.change_xid, e.seq) > (@after_xid::bigint, @after_seq::bigint)
             AND (e.change_xid, e.seq) <= (w.after_xid, w.after_seq)
             AND e.type = ANY (w.event_types)
WHERE w.workspace_id = @workspace_id AND w.id = @endpoint_id
ON CONFLICT (workspace_id, endpoint_id, event_xid, event_seq) DO UPDATE
SET status = 'pending', attempts = 0, next_attempt_at = now(), lease_until = NULL, first_attempt_at = NULL;

-- WebhookResume makes a re-enabled endpoint's given-up deliveries due again.
-- name: WebhookResume :exec
UPDATE webhook_deliveries
SET status = 'pending', attempts = 0, next_attempt_at = now(), lease_until = NULL, first_attempt_at = NULL
WHERE workspace_id = @workspace_id AND endpoint_id = @endpoint_id AND status = 'failed';

-- WebhookEndpointSecrets are what a test delivery signs with.
-- name: WebhookEndpointSecrets :one
SELECT url, secret, coalesce(CASE WHEN previous_expires_at > now() THEN previous_secret END, '')::text AS previous_secret
FROM webhook_endpoints WHERE workspace_id = @workspace_id AND id = @endpoint_id;

-- WebhookDisableForClient disables every endpoint of a revoked client for
-- good ('client_revoked'), in the revocation's transaction.
-- name: WebhookDisableForClient :execrows
UPDATE webhook_endpoints
SET status = 'disabled', disabled_reason = 'client_revoked', updated_at = now()
WHERE workspace_id = @workspace_id AND client_id = @client_id AND disabled_reason IS DISTINCT FROM 'client_revoked';

-- WebhookDeleteOld removes delivery log rows older than before, and ended
-- deliveries as old (the retention sweep; bounded per run).
-- name: WebhookAttemptsDeleteOld :execrows
DELETE FROM webhook_attempts
WHERE (workspace_id, endpoint_id, id) IN (
    SELECT a.workspace_id, a.endpoint_id, a.id FROM webhook_attempts AS a WHERE a.at < @before LIMIT @max_rows);

-- name: WebhookDeliveriesDeleteOld :execrows
DELETE FROM webhook_deliveries
WHERE (workspace_id, endpoint_id, event_xid, event_seq) IN (
    SELECT d.workspace_id, d.endpoint_id, d.event_xid, d.event_seq FROM webhook_deliveries AS d
    WHERE d.status <> 'pending' AND d.created_at < @before LIMIT @max_rows);

-- WebhookRecordMany ends a group of attempts in one call and one commit
-- (webhook_record_many, migration 00107; the engine's workers share it,
-- as the token and lead writes share theirs); a zero next, status or
-- error is none. It returns how many still held their lease.
-- name: WebhookRecordMany :one
SELECT webhook_record_many(@workspace_ids::uuid[], @endpoint_ids::uuid[], @event_xids::bigint[], @event_seqs::bigint[],
                           @attempts::int[], @outcomes::text[], @next_attempt_ats::timestamptz[],
                           @response_statuses::int[], @duration_ms::int[], @errors::text[])::int AS recorded;
