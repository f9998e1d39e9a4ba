-- WebhookStart is the feed position of a new endpoint of the workspace:
-- the last of its events below the watermark (every transaction below it
-- has ended, so no event can join them later), or (0, 0) when it has
-- none. The endpoint gets every event after it: those of transactions at
-- or above the watermark. Those are the ones that commit after this
-- statement's snapshot, and, while a transaction older than the
-- workspace's last writes still runs anywhere in the cluster (it holds the
-- watermark), those writes too: a place in the feed is one position, and
-- cannot leave out events above it that had committed. So a new endpoint
-- may get a few events from just before its creation, never fewer than
-- every one after.
-- name: WebhookStart :one
SELECT coalesce(l.change_xid, 0)::bigint AS after_xid, coalesce(l.seq, 0)::bigint AS after_seq
FROM (SELECT) AS one
LEFT JOIN LATERAL (SELECT e.change_xid, e.seq FROM events e
                   WHERE e.workspace_id = @workspace_id AND e.change_xid < partner_sync_horizon()
                   ORDER BY e.change_xid DESC, e.seq DESC
                   LIMIT 1) AS l ON true;

-- WebhookFanout moves the feed into deliveries (webhook_fanout_bounded:
-- at most max_pending pending an endpoint, an endpoint held there without
-- a success for stall_ms disabled 'backlog'), and says whether any
-- endpoint is enabled, how many deliveries it made and how many endpoints
-- it held at the bound: with none enabled the engine rests its fan-outs a
-- while (delivery.Engine), since the writes that wake it have nowhere to
-- go.
-- name: WebhookFanout :one
SELECT f.enabled::bool AS enabled, f.moved::int AS moved, f.held::int AS held
FROM webhook_fanout_bounded(@max_endpoints::int, @max_events::int, @max_pending::int, @stall_ms::int) AS f;

-- WebhookDeliveriesAnalyze refreshes the delivery table's statistics
-- after a fan-out has filled it (a backlog moves thousands of events in a
-- second; autovacuum analyses a minute later at best, and until then the
-- claim is planned for the table as it was, often empty).
-- name: WebhookDeliveriesAnalyze :exec
ANALYZE webhook_deliveries;

-- WebhookClaimSealed leases due deliveries (webhook_claim_sealed). types
-- and scopes are the event types and the scope that reads each, pairwise
-- (eventtype.All): a delivery whose client lacks its type's scope, or of a
-- type not listed, is dropped, never sent. pool, min_share, busy_ws and
-- busy_n are this replica's fair shares: the workers shared among the
-- workspaces, the least share, and the workspaces with deliveries in
-- flight here with how many each.
-- name: WebhookClaimSealed :many
SELECT * FROM webhook_claim_sealed(@lease_ms::int, @per_endpoint::int, @max_rows::int, @types::text[], @scopes::text[],
                                   @pool::int, @min_share::int, @busy_ws::uuid[], @busy_n::int[], false);

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
-- anew for those it has none of any more, restarted for the others. The
-- endpoint's count of pending deliveries is unknown after it (the fan-out
-- counts again).
-- name: WebhookReplay :execrows
WITH uncounted AS (
    UPDATE webhook_endpoints n SET pending_ceiling = NULL WHERE n.workspace_id = @workspace_id AND n.id = @endpoint_id
)
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

-- WebhookResume makes a re-enabled endpoint's deliveries due again, with a
-- whole schedule each: the given-up ones, and the pending ones that wait
-- for a retry (an endpoint disabled for its backlog holds up to
-- PARTNER_WEBHOOK_MAX_PENDING of them, some due hours later); one in
-- flight is left to end. Its count of pending deliveries is unknown after
-- it (the fan-out counts again).
-- name: WebhookResume :exec
WITH uncounted AS (
    UPDATE webhook_endpoints n SET pending_ceiling = NULL WHERE n.workspace_id = @workspace_id AND n.id = @endpoint_id
)
UPDATE webhook_deliveries d
SET status = 'pending', attempts = 0, next_attempt_at = now(), lease_until = NULL, first_attempt_at = NULL
WHERE d.workspace_id = @workspace_id AND d.endpoint_id = @endpoint_id
  AND (d.status = 'failed' OR d.status = 'pending' AND (d.lease_until IS NULL OR d.lease_until <= now()));

-- WebhookEndpointSecrets are what a test delivery signs with: the
-- previous secret is NULL when there is none or its overlap has ended (the
-- row joined again, by its key, only while the overlap lasts: a column,
-- so that sqlc reads it as nullable).
-- name: WebhookEndpointSecrets :one
SELECT w.url, w.secret, w.secret_sealed, p.previous_secret, p.previous_secret_sealed
FROM webhook_endpoints w
LEFT JOIN webhook_endpoints p ON p.workspace_id = w.workspace_id AND p.id = w.id AND p.previous_expires_at > now()
WHERE w.workspace_id = @workspace_id AND w.id = @endpoint_id;

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

-- WebhookAttemptsEnd records the ends of a group of attempts in one call
-- and one commit (webhook_attempts_end; the engine's workers share it, as
-- the token and lead writes share theirs). Items travel as JSON read as
-- webhook_attempt_end by name, so a null or absent member is NULL: no
-- next attempt, no HTTP status, no error. It returns how many still held
-- their lease.
-- name: WebhookAttemptsEnd :one
SELECT webhook_attempts_end(ARRAY(SELECT jsonb_populate_recordset(NULL::webhook_attempt_end, @items::jsonb)))::int AS recorded;

-- WebhookBacklog is the delivery backlog as an operator sees it on
-- GET /metrics (across workspaces: the admin listener is the operator's),
-- by endpoint status and disabled reason: how many endpoints, how many
-- pending deliveries (each endpoint's counted up to max_per_endpoint, read
-- from the index of its pending deliveries alone, never its ended ones),
-- and how long ago the oldest pending event was written (its
-- transaction's time; the delivery's own when the event is gone), 0 with
-- none pending: of each endpoint's first pending delivery in feed order
-- among those counted. One statement, bounded by the endpoints and the
-- cap, run at most every few seconds (delivery.backlog).
-- name: WebhookBacklog :many
SELECT w.status, w.disabled_reason, count(*)::bigint AS endpoints, coalesce(sum(p.n), 0)::bigint AS pending,
       coalesce(extract(epoch FROM clock_timestamp() - min(d.written)), 0)::float8 AS oldest_pending_age_seconds
FROM webhook_endpoints w
CROSS JOIN LATERAL (SELECT count(*) AS n, min(x.event_xid) AS first_xid
                    FROM (SELECT f.event_xid FROM webhook_deliveries f
                          WHERE f.workspace_id = w.workspace_id AND f.endpoint_id = w.id AND f.status = 'pending'
                          LIMIT @max_per_endpoint::int) AS x) AS p
LEFT JOIN LATERAL (SELECT coalesce((SELECT ev.created_at FROM events ev
                                    WHERE ev.workspace_id = f.workspace_id AND ev.change_xid = f.event_xid
                                      AND ev.seq = f.event_seq), f.created_at) AS written
                   FROM webhook_deliveries f
                   WHERE f.workspace_id = w.workspace_id AND f.endpoint_id = w.id AND f.event_xid = p.first_xid
                     AND f.status = 'pending'
                   ORDER BY f.event_seq LIMIT 1) AS d ON true
GROUP BY w.status, w.disabled_reason;
