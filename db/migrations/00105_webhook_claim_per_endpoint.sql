-- +goose Up

-- webhook_claim per endpoint (make bench, scenario (g)): the first claim
-- joined every pending delivery of every endpoint, ran the per-record
-- check for each and sorted them all before its LIMIT, so a claim cost
-- grew with the backlog (475 ms at 20,000 pending, past the statement
-- timeout right after a fan-out) and a backlog drained the more slowly
-- the bigger it was. Now each endpoint with work gets at most its free
-- slots, read in feed order from an index of its pending deliveries, and
-- its in-flight count comes from an index of the leased ones only.
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (workspace_id, endpoint_id, event_xid, event_seq)
    WHERE status = 'pending';
CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (workspace_id, endpoint_id)
    WHERE lease_until IS NOT NULL;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_claim(p_lease_ms int, p_per_endpoint int, p_max int)
RETURNS SETOF webhook_claimed LANGUAGE plpgsql AS $$
DECLARE
    ep record;
    r record;
    c webhook_claimed;
    slots int;
    taken int := 0;
BEGIN
    FOR ep IN
        SELECT w.workspace_id, w.id, cl.scopes FROM webhook_endpoints w
        JOIN api_clients cl ON cl.workspace_id = w.workspace_id AND cl.id = w.client_id AND cl.status = 'active'
        WHERE w.status = 'enabled'
          AND EXISTS (SELECT 1 FROM webhook_deliveries d
                      WHERE d.workspace_id = w.workspace_id AND d.endpoint_id = w.id AND d.status = 'pending'
                        AND d.next_attempt_at <= now())
        ORDER BY random()
    LOOP
        SELECT p_per_endpoint - count(*) INTO slots FROM webhook_deliveries f
        WHERE f.workspace_id = ep.workspace_id AND f.endpoint_id = ep.id
          AND f.lease_until IS NOT NULL AND f.lease_until > now() AND f.status = 'pending';
        slots := least(slots, p_max - taken);
        CONTINUE WHEN slots <= 0;
        FOR r IN
            SELECT d.event_xid, d.event_seq, d.event_type FROM webhook_deliveries d
            WHERE d.workspace_id = ep.workspace_id AND d.endpoint_id = ep.id AND d.status = 'pending'
              AND d.next_attempt_at <= now() AND (d.lease_until IS NULL OR d.lease_until <= now())
              AND NOT EXISTS (SELECT 1 FROM webhook_deliveries p
                              WHERE p.workspace_id = d.workspace_id AND p.endpoint_id = d.endpoint_id
                                AND p.record_id = d.record_id AND p.status = 'pending'
                                AND (p.event_xid, p.event_seq) < (d.event_xid, d.event_seq))
            ORDER BY d.event_xid, d.event_seq
            LIMIT slots * 2
            FOR UPDATE OF d SKIP LOCKED
        LOOP
            IF NOT ((CASE WHEN r.event_type LIKE 'contact.%' THEN 'contacts:read' ELSE 'leads:read' END) = ANY (ep.scopes)) THEN
                DELETE FROM webhook_deliveries
                WHERE workspace_id = ep.workspace_id AND endpoint_id = ep.id
                  AND event_xid = r.event_xid AND event_seq = r.event_seq;
                CONTINUE;
            END IF;
            UPDATE webhook_deliveries d
            SET lease_until = clock_timestamp() + make_interval(secs => p_lease_ms / 1000.0),
                attempts = d.attempts + 1, first_attempt_at = coalesce(d.first_attempt_at, now())
            WHERE d.workspace_id = ep.workspace_id AND d.endpoint_id = ep.id
              AND d.event_xid = r.event_xid AND d.event_seq = r.event_seq;
            SELECT d.workspace_id, d.endpoint_id, d.event_xid, d.event_seq, d.event_id, d.event_type, d.record_id,
                   d.attempts, d.lease_until, w.url, w.secret,
                   CASE WHEN w.previous_expires_at > now() THEN w.previous_secret END, w.previous_expires_at,
                   e.object, e.changed, coalesce(e.created_at, d.created_at)
            INTO c
            FROM webhook_deliveries d
            JOIN webhook_endpoints w ON w.workspace_id = d.workspace_id AND w.id = d.endpoint_id
            LEFT JOIN events e ON e.workspace_id = d.workspace_id AND e.change_xid = d.event_xid AND e.seq = d.event_seq
            WHERE d.workspace_id = ep.workspace_id AND d.endpoint_id = ep.id
              AND d.event_xid = r.event_xid AND d.event_seq = r.event_seq;
            RETURN NEXT c;
            taken := taken + 1;
            slots := slots - 1;
            EXIT WHEN slots <= 0;
        END LOOP;
        EXIT WHEN taken >= p_max;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_claim(p_lease_ms int, p_per_endpoint int, p_max int)
RETURNS SETOF webhook_claimed LANGUAGE plpgsql AS $$
DECLARE
    r record;
    c webhook_claimed;
    inflight jsonb := '{}';
    n int;
    taken int := 0;
BEGIN
    FOR r IN
        SELECT d.workspace_id, d.endpoint_id, d.event_xid, d.event_seq, d.event_type, cl.scopes
        FROM webhook_deliveries d
        JOIN webhook_endpoints w ON w.workspace_id = d.workspace_id AND w.id = d.endpoint_id AND w.status = 'enabled'
        JOIN api_clients cl ON cl.workspace_id = w.workspace_id AND cl.id = w.client_id AND cl.status = 'active'
        WHERE d.status = 'pending' AND d.next_attempt_at <= now()
          AND (d.lease_until IS NULL OR d.lease_until <= now())
          AND NOT EXISTS (SELECT 1 FROM webhook_deliveries p
                          WHERE p.workspace_id = d.workspace_id AND p.endpoint_id = d.endpoint_id
                            AND p.record_id = d.record_id AND p.status = 'pending'
                            AND (p.event_xid, p.event_seq) < (d.event_xid, d.event_seq))
        ORDER BY d.next_attempt_at, d.event_xid, d.event_seq
        LIMIT p_max * 4
        FOR UPDATE OF d SKIP LOCKED
    LOOP
        IF NOT ((CASE WHEN r.event_type LIKE 'contact.%' THEN 'contacts:read' ELSE 'leads:read' END) = ANY (r.scopes)) THEN
            DELETE FROM webhook_deliveries
            WHERE workspace_id = r.workspace_id AND endpoint_id = r.endpoint_id
              AND event_xid = r.event_xid AND event_seq = r.event_seq;
            CONTINUE;
        END IF;
        n := (inflight ->> r.endpoint_id::text)::int;
        IF n IS NULL THEN
            SELECT count(*) INTO n FROM webhook_deliveries f
            WHERE f.workspace_id = r.workspace_id AND f.endpoint_id = r.endpoint_id
              AND f.status = 'pending' AND f.lease_until > now();
        END IF;
        CONTINUE WHEN n >= p_per_endpoint;
        inflight := jsonb_set(inflight, ARRAY[r.endpoint_id::text], to_jsonb(n + 1));
        UPDATE webhook_deliveries d
        SET lease_until = clock_timestamp() + make_interval(secs => p_lease_ms / 1000.0),
            attempts = d.attempts + 1, first_attempt_at = coalesce(d.first_attempt_at, now())
        WHERE d.workspace_id = r.workspace_id AND d.endpoint_id = r.endpoint_id
          AND d.event_xid = r.event_xid AND d.event_seq = r.event_seq;
        SELECT d.workspace_id, d.endpoint_id, d.event_xid, d.event_seq, d.event_id, d.event_type, d.record_id,
               d.attempts, d.lease_until, w.url, w.secret,
               CASE WHEN w.previous_expires_at > now() THEN w.previous_secret END, w.previous_expires_at,
               e.object, e.changed, coalesce(e.created_at, d.created_at)
        INTO c
        FROM webhook_deliveries d
        JOIN webhook_endpoints w ON w.workspace_id = d.workspace_id AND w.id = d.endpoint_id
        LEFT JOIN events e ON e.workspace_id = d.workspace_id AND e.change_xid = d.event_xid AND e.seq = d.event_seq
        WHERE d.workspace_id = r.workspace_id AND d.endpoint_id = r.endpoint_id
          AND d.event_xid = r.event_xid AND d.event_seq = r.event_seq;
        RETURN NEXT c;
        taken := taken + 1;
        EXIT WHEN taken >= p_max;
    END LOOP;
END
$$;
-- +goose StatementEnd
DROP INDEX webhook_deliveries_leased;
DROP INDEX webhook_deliveries_pending;
