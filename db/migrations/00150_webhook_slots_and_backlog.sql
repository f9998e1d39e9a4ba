-- +goose Up

-- One workspace's slow endpoints must not stall every workspace's webhooks,
-- and an endpoint's backlog is bounded (issue 34, finding 1; docs/webhooks.md,
-- "Fair shares and the backlog bound"): three nullable columns of the
-- endpoint, each the engine's bookkeeping (never shown to a partner).
--
-- timeouts counts the endpoint's attempts in a row that timed out (NULL:
-- none since its last answer). webhook_attempts_end keeps it, and
-- webhook_claim_due gives an endpoint with two or more one request in
-- flight instead of PARTNER_WEBHOOK_CONCURRENCY, until it answers again: a
-- receiver that hangs holds a worker for the whole timeout.
--
-- pending_ceiling is an upper bound of the endpoint's pending deliveries:
-- their count when pending_counted_at (bounded at the limit), plus every
-- delivery the fan-out made since. NULL: unknown (never counted, or a
-- replay or resume made deliveries pending since). The fan-out
-- (webhook_fanout_bounded) never lets the count pass the limit
-- (PARTNER_WEBHOOK_MAX_PENDING) and counts again, at most once a second,
-- only when the ceiling nears it: counting a large backlog at every
-- fan-out would cost more than the deliveries.
--
-- 'backlog', the reason of an endpoint the fan-out disabled at the limit,
-- is in the disabled_reason check since 00140.
ALTER TABLE webhook_endpoints ADD COLUMN timeouts bigint;
ALTER TABLE webhook_endpoints ADD COLUMN pending_ceiling bigint;
ALTER TABLE webhook_endpoints ADD COLUMN pending_counted_at timestamptz;

-- webhook_claim_due takes the engine's fair shares now (new arguments):
-- the file db/functions/webhook_claim_due.sql creates it again. Only this
-- release calls it (1.0.0 calls webhook_claim), so the old signature goes.
DROP FUNCTION IF EXISTS webhook_claim_due(int, int, int, text[], text[]);

-- +goose Down
-- The function files that read the columns go with them, and their
-- records, so that the next up applies them again; webhook_fanout, which
-- calls webhook_fanout_bounded, is applied again by the binary that needs
-- it (its record goes too).
DROP FUNCTION IF EXISTS webhook_claim_due(int, int, int, text[], text[], int, int, uuid[], int[]);
DROP FUNCTION IF EXISTS webhook_fanout_bounded(int, int, int, int);
DELETE FROM schema_functions WHERE name IN ('webhook_claim_due', 'webhook_fanout_bounded', 'webhook_fanout', 'webhook_attempts_end');
ALTER TABLE webhook_endpoints DROP COLUMN pending_counted_at;
ALTER TABLE webhook_endpoints DROP COLUMN pending_ceiling;
ALTER TABLE webhook_endpoints DROP COLUMN timeouts;
