-- +goose Up

-- The delivery engine's statements commit without waiting for the WAL
-- flush (synchronous_commit off for their own transactions, and so
-- without waiting for a synchronous standby either). What they write is
-- the engine's bookkeeping, never an answer a partner holds: a fan-out
-- lost to a crash moves the same events again, a lost lease makes the
-- delivery due again, a lost attempt record leaves its lease to run out
-- and the event is sent again, which the at-least-once contract allows
-- and the webhook-id lets a receiver drop. Each delivery waited for two
-- flushes (its claim's and its record's), which made the flush time, not
-- the work, what bounded make bench (g).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_fanout(p_endpoints int, p_events int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    horizon bigint := partner_sync_horizon();
    ep record;
    made int;
    total int := 0;
    lx bigint;
    ls bigint;
BEGIN
    -- An attempt, a claim or a fan-out lost to a crash is made again
    -- (at least once), so none waits for its commit to be flushed.
    PERFORM set_config('synchronous_commit', 'off', true);
    FOR ep IN SELECT w.workspace_id, w.id, w.event_types, w.after_xid, w.after_seq FROM webhook_endpoints w
              WHERE w.status = 'enabled' AND EXISTS (
                  SELECT 1 FROM events e WHERE e.workspace_id = w.workspace_id AND e.change_xid < horizon
                    AND (e.change_xid, e.seq) > (w.after_xid, w.after_seq))
              LIMIT p_endpoints FOR UPDATE OF w SKIP LOCKED LOOP
        WITH ev AS (
            SELECT e.change_xid, e.seq, e.id, e.type, e.record_id FROM events e
            WHERE e.workspace_id = ep.workspace_id AND e.change_xid < horizon
              AND (e.change_xid, e.seq) > (ep.after_xid, ep.after_seq)
            ORDER BY e.change_xid, e.seq
            LIMIT p_events
        ), ins AS (
            INSERT INTO webhook_deliveries (workspace_id, endpoint_id, event_xid, event_seq, event_id, event_type, record_id)
            SELECT ep.workspace_id, ep.id, ev.change_xid, ev.seq, ev.id, ev.type, ev.record_id
            FROM ev WHERE ev.type = ANY (ep.event_types)
            ON CONFLICT DO NOTHING
            RETURNING 1
        ), last AS (
            SELECT ev.change_xid, ev.seq FROM ev ORDER BY ev.change_xid DESC, ev.seq DESC LIMIT 1
        )
        SELECT (SELECT count(*) FROM ins), (SELECT change_xid FROM last), (SELECT seq FROM last) INTO made, lx, ls;
        IF lx IS NOT NULL THEN
            UPDATE webhook_endpoints SET after_xid = lx, after_seq = ls
            WHERE workspace_id = ep.workspace_id AND id = ep.id;
        END IF;
        total := total + made;
    END LOOP;
    RETURN total;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_claim(p_lease_ms int, p_per_endpoint int, p_max int)
RETURNS SETOF webhook_claimed LANGUAGE plpgsql AS $$
BEGIN
    -- An attempt, a claim or a fan-out lost to a crash is made again
    -- (at least once), so none waits for its commit to be flushed.
    PERFORM set_config('synchronous_commit', 'off', true);
    -- One statement for every endpoint: each enabled endpoint with a due
    -- delivery gets at most its free slots (its leased deliveries counted
    -- across replicas), from its due deliveries in due order, the first
    -- pending one of each record only; deliveries of an event type the
    -- client may no longer read are dropped; p_max bounds the whole.
    RETURN QUERY
    WITH ep AS (
        SELECT w.workspace_id, w.id, cl.scopes,
               p_per_endpoint - (SELECT count(*)::int FROM webhook_deliveries f
                                 WHERE f.workspace_id = w.workspace_id AND f.endpoint_id = w.id
                                   AND f.lease_until IS NOT NULL AND f.lease_until > now() AND f.status = 'pending') AS slots
        FROM webhook_endpoints w
        JOIN api_clients cl ON cl.workspace_id = w.workspace_id AND cl.id = w.client_id AND cl.status = 'active'
        WHERE w.status = 'enabled'
          AND (SELECT d.next_attempt_at FROM webhook_deliveries d
               WHERE d.workspace_id = w.workspace_id AND d.endpoint_id = w.id AND d.status = 'pending'
               ORDER BY d.next_attempt_at LIMIT 1) <= now()
    ), cand AS (
        SELECT c.workspace_id, c.endpoint_id, c.event_xid, c.event_seq, c.next_attempt_at, ep.slots,
               (CASE WHEN c.event_type LIKE 'contact.%' THEN 'contacts:read' ELSE 'leads:read' END) = ANY (ep.scopes) AS readable
        FROM ep, LATERAL (
            SELECT d.workspace_id, d.endpoint_id, d.event_xid, d.event_seq, d.next_attempt_at, d.event_type
            FROM webhook_deliveries d
            WHERE d.workspace_id = ep.workspace_id AND d.endpoint_id = ep.id AND d.status = 'pending'
              AND d.next_attempt_at <= now() AND (d.lease_until IS NULL OR d.lease_until <= now())
              AND NOT EXISTS (SELECT 1 FROM webhook_deliveries p
                              WHERE p.workspace_id = d.workspace_id AND p.endpoint_id = d.endpoint_id
                                AND p.record_id = d.record_id AND p.status = 'pending'
                                AND (p.event_xid, p.event_seq) < (d.event_xid, d.event_seq)
                              OFFSET 0)
            ORDER BY d.next_attempt_at, d.event_xid, d.event_seq
            LIMIT ep.slots * 2
            FOR UPDATE OF d SKIP LOCKED
        ) c
        WHERE ep.slots > 0
    ), pick AS (
        SELECT x.workspace_id, x.endpoint_id, x.event_xid, x.event_seq FROM (
            SELECT c.*, row_number() OVER (PARTITION BY c.workspace_id, c.endpoint_id
                                           ORDER BY c.next_attempt_at, c.event_xid, c.event_seq) AS n
            FROM cand c WHERE c.readable) x
        WHERE x.n <= x.slots
        ORDER BY random()
        LIMIT p_max
    ), dropped AS (
        DELETE FROM webhook_deliveries x USING cand c
        WHERE NOT c.readable AND x.workspace_id = c.workspace_id AND x.endpoint_id = c.endpoint_id
          AND x.event_xid = c.event_xid AND x.event_seq = c.event_seq
    ), leased AS (
        UPDATE webhook_deliveries x
        SET lease_until = clock_timestamp() + make_interval(secs => p_lease_ms / 1000.0),
            attempts = x.attempts + 1, first_attempt_at = coalesce(x.first_attempt_at, now())
        FROM pick c
        WHERE x.workspace_id = c.workspace_id AND x.endpoint_id = c.endpoint_id
          AND x.event_xid = c.event_xid AND x.event_seq = c.event_seq
        RETURNING x.*
    )
    SELECT l.workspace_id, l.endpoint_id, l.event_xid, l.event_seq, l.event_id, l.event_type, l.record_id,
           l.attempts, l.lease_until, w.url, w.secret,
           CASE WHEN w.previous_expires_at > now() THEN w.previous_secret END, w.previous_expires_at,
           e.object, e.changed, coalesce(e.created_at, l.created_at)
    FROM leased l
    JOIN webhook_endpoints w ON w.workspace_id = l.workspace_id AND w.id = l.endpoint_id
    LEFT JOIN events e ON e.workspace_id = l.workspace_id AND e.change_xid = l.event_xid AND e.seq = l.event_seq;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_record_many(p_w uuid[], p_e uuid[], p_x bigint[], p_s bigint[], p_a int[], p_o text[],
                                    p_n timestamptz[], p_r int[], p_d int[], p_er text[])
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    ok_w uuid[]; ok_e uuid[];
    gone_w uuid[]; gone_e uuid[];
    fail_w uuid[]; fail_e uuid[]; fail_first timestamptz[];
    n int;
BEGIN
    -- An attempt, a claim or a fan-out lost to a crash is made again
    -- (at least once), so none waits for its commit to be flushed.
    PERFORM set_config('synchronous_commit', 'off', true);
    WITH t AS (
        SELECT * FROM unnest(p_w, p_e, p_x, p_s, p_a, p_o, p_n, p_r, p_d, p_er) AS t(w, e, x, s, a, o, nx, r, d, er)
    ), done AS (
        DELETE FROM webhook_deliveries d USING t
        WHERE t.o = 'succeeded' AND d.workspace_id = t.w AND d.endpoint_id = t.e
          AND d.event_xid = t.x AND d.event_seq = t.s AND d.attempts = t.a AND d.status = 'pending'
        RETURNING d.workspace_id, d.endpoint_id, d.event_id, d.event_type, d.first_attempt_at, t.a, t.o, t.r, t.d, t.er
    ), kept AS (
        UPDATE webhook_deliveries d
        SET status = CASE t.o WHEN 'retry' THEN 'pending' ELSE 'failed' END,
            next_attempt_at = CASE WHEN t.nx < '1900-01-01' THEN d.next_attempt_at ELSE t.nx END, lease_until = NULL
        FROM t
        WHERE t.o <> 'succeeded' AND d.workspace_id = t.w AND d.endpoint_id = t.e
          AND d.event_xid = t.x AND d.event_seq = t.s AND d.attempts = t.a AND d.status = 'pending'
        RETURNING d.workspace_id, d.endpoint_id, d.event_id, d.event_type, d.first_attempt_at, t.a, t.o, t.r, t.d, t.er
    ), ended AS (
        SELECT * FROM done UNION ALL SELECT * FROM kept
    ), logged AS (
        INSERT INTO webhook_attempts (workspace_id, endpoint_id, event_id, event_type, attempt, status, response_status,
                                      duration_ms, error)
        SELECT workspace_id, endpoint_id, event_id, event_type, a,
               CASE o WHEN 'succeeded' THEN 'succeeded' WHEN 'retry' THEN 'pending' ELSE 'failed' END,
               nullif(r, 0), d, nullif(er, '')
        FROM ended
    )
    SELECT count(*),
           array_agg(workspace_id) FILTER (WHERE o = 'succeeded'), array_agg(endpoint_id) FILTER (WHERE o = 'succeeded'),
           array_agg(workspace_id) FILTER (WHERE o = 'gone'), array_agg(endpoint_id) FILTER (WHERE o = 'gone'),
           array_agg(workspace_id) FILTER (WHERE o = 'failed'), array_agg(endpoint_id) FILTER (WHERE o = 'failed'),
           array_agg(first_attempt_at) FILTER (WHERE o = 'failed')
    INTO n, ok_w, ok_e, gone_w, gone_e, fail_w, fail_e, fail_first
    FROM ended;
    IF ok_w IS NOT NULL THEN
        UPDATE webhook_endpoints w SET last_success_at = now()
        FROM (SELECT DISTINCT u.w, u.e FROM unnest(ok_w, ok_e) AS u(w, e)) u
        WHERE w.workspace_id = u.w AND w.id = u.e
          AND (w.last_success_at IS NULL OR w.last_success_at < now() - interval '1 second');
    END IF;
    IF gone_w IS NOT NULL THEN
        UPDATE webhook_endpoints w SET status = 'disabled', disabled_reason = 'gone', updated_at = now()
        FROM (SELECT DISTINCT u.w, u.e FROM unnest(gone_w, gone_e) AS u(w, e)) u
        WHERE w.workspace_id = u.w AND w.id = u.e AND w.status = 'enabled';
    END IF;
    IF fail_w IS NOT NULL THEN
        UPDATE webhook_endpoints w SET status = 'disabled', disabled_reason = 'failing', updated_at = now()
        FROM (SELECT u.w, u.e, max(u.f) AS f FROM unnest(fail_w, fail_e, fail_first) AS u(w, e, f) GROUP BY u.w, u.e) u
        WHERE w.workspace_id = u.w AND w.id = u.e AND w.status = 'enabled'
          AND (w.last_success_at IS NULL OR w.last_success_at < u.f);
    END IF;
    RETURN n;
END
$$;
-- +goose StatementEnd

-- The global index of due deliveries goes: the next due time is the first
-- of each endpoint's (WebhookNextDue), read from the per-endpoint index
-- (00107), and every delivery row version (its fan-out, its lease, a
-- retry) paid for one more index entry.
DROP INDEX webhook_deliveries_due;

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_fanout(p_endpoints int, p_events int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    horizon bigint := partner_sync_horizon();
    ep record;
    made int;
    total int := 0;
    lx bigint;
    ls bigint;
BEGIN
    FOR ep IN SELECT w.workspace_id, w.id, w.event_types, w.after_xid, w.after_seq FROM webhook_endpoints w
              WHERE w.status = 'enabled' AND EXISTS (
                  SELECT 1 FROM events e WHERE e.workspace_id = w.workspace_id AND e.change_xid < horizon
                    AND (e.change_xid, e.seq) > (w.after_xid, w.after_seq))
              LIMIT p_endpoints FOR UPDATE OF w SKIP LOCKED LOOP
        WITH ev AS (
            SELECT e.change_xid, e.seq, e.id, e.type, e.record_id FROM events e
            WHERE e.workspace_id = ep.workspace_id AND e.change_xid < horizon
              AND (e.change_xid, e.seq) > (ep.after_xid, ep.after_seq)
            ORDER BY e.change_xid, e.seq
            LIMIT p_events
        ), ins AS (
            INSERT INTO webhook_deliveries (workspace_id, endpoint_id, event_xid, event_seq, event_id, event_type, record_id)
            SELECT ep.workspace_id, ep.id, ev.change_xid, ev.seq, ev.id, ev.type, ev.record_id
            FROM ev WHERE ev.type = ANY (ep.event_types)
            ON CONFLICT DO NOTHING
            RETURNING 1
        ), last AS (
            SELECT ev.change_xid, ev.seq FROM ev ORDER BY ev.change_xid DESC, ev.seq DESC LIMIT 1
        )
        SELECT (SELECT count(*) FROM ins), (SELECT change_xid FROM last), (SELECT seq FROM last) INTO made, lx, ls;
        IF lx IS NOT NULL THEN
            UPDATE webhook_endpoints SET after_xid = lx, after_seq = ls
            WHERE workspace_id = ep.workspace_id AND id = ep.id;
        END IF;
        total := total + made;
    END LOOP;
    RETURN total;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_claim(p_lease_ms int, p_per_endpoint int, p_max int)
RETURNS SETOF webhook_claimed LANGUAGE plpgsql AS $$
BEGIN
    -- One statement for every endpoint: each enabled endpoint with a due
    -- delivery gets at most its free slots (its leased deliveries counted
    -- across replicas), from its due deliveries in due order, the first
    -- pending one of each record only; deliveries of an event type the
    -- client may no longer read are dropped; p_max bounds the whole.
    RETURN QUERY
    WITH ep AS (
        SELECT w.workspace_id, w.id, cl.scopes,
               p_per_endpoint - (SELECT count(*)::int FROM webhook_deliveries f
                                 WHERE f.workspace_id = w.workspace_id AND f.endpoint_id = w.id
                                   AND f.lease_until IS NOT NULL AND f.lease_until > now() AND f.status = 'pending') AS slots
        FROM webhook_endpoints w
        JOIN api_clients cl ON cl.workspace_id = w.workspace_id AND cl.id = w.client_id AND cl.status = 'active'
        WHERE w.status = 'enabled'
          AND (SELECT d.next_attempt_at FROM webhook_deliveries d
               WHERE d.workspace_id = w.workspace_id AND d.endpoint_id = w.id AND d.status = 'pending'
               ORDER BY d.next_attempt_at LIMIT 1) <= now()
    ), cand AS (
        SELECT c.workspace_id, c.endpoint_id, c.event_xid, c.event_seq, c.next_attempt_at, ep.slots,
               (CASE WHEN c.event_type LIKE 'contact.%' THEN 'contacts:read' ELSE 'leads:read' END) = ANY (ep.scopes) AS readable
        FROM ep, LATERAL (
            SELECT d.workspace_id, d.endpoint_id, d.event_xid, d.event_seq, d.next_attempt_at, d.event_type
            FROM webhook_deliveries d
            WHERE d.workspace_id = ep.workspace_id AND d.endpoint_id = ep.id AND d.status = 'pending'
              AND d.next_attempt_at <= now() AND (d.lease_until IS NULL OR d.lease_until <= now())
              AND NOT EXISTS (SELECT 1 FROM webhook_deliveries p
                              WHERE p.workspace_id = d.workspace_id AND p.endpoint_id = d.endpoint_id
                                AND p.record_id = d.record_id AND p.status = 'pending'
                                AND (p.event_xid, p.event_seq) < (d.event_xid, d.event_seq)
                              OFFSET 0)
            ORDER BY d.next_attempt_at, d.event_xid, d.event_seq
            LIMIT ep.slots * 2
            FOR UPDATE OF d SKIP LOCKED
        ) c
        WHERE ep.slots > 0
    ), pick AS (
        SELECT x.workspace_id, x.endpoint_id, x.event_xid, x.event_seq FROM (
            SELECT c.*, row_number() OVER (PARTITION BY c.workspace_id, c.endpoint_id
                                           ORDER BY c.next_attempt_at, c.event_xid, c.event_seq) AS n
            FROM cand c WHERE c.readable) x
        WHERE x.n <= x.slots
        ORDER BY random()
        LIMIT p_max
    ), dropped AS (
        DELETE FROM webhook_deliveries x USING cand c
        WHERE NOT c.readable AND x.workspace_id = c.workspace_id AND x.endpoint_id = c.endpoint_id
          AND x.event_xid = c.event_xid AND x.event_seq = c.event_seq
    ), leased AS (
        UPDATE webhook_deliveries x
        SET lease_until = clock_timestamp() + make_interval(secs => p_lease_ms / 1000.0),
            attempts = x.attempts + 1, first_attempt_at = coalesce(x.first_attempt_at, now())
        FROM pick c
        WHERE x.workspace_id = c.workspace_id AND x.endpoint_id = c.endpoint_id
          AND x.event_xid = c.event_xid AND x.event_seq = c.event_seq
        RETURNING x.*
    )
    SELECT l.workspace_id, l.endpoint_id, l.event_xid, l.event_seq, l.event_id, l.event_type, l.record_id,
           l.attempts, l.lease_until, w.url, w.secret,
           CASE WHEN w.previous_expires_at > now() THEN w.previous_secret END, w.previous_expires_at,
           e.object, e.changed, coalesce(e.created_at, l.created_at)
    FROM leased l
    JOIN webhook_endpoints w ON w.workspace_id = l.workspace_id AND w.id = l.endpoint_id
    LEFT JOIN events e ON e.workspace_id = l.workspace_id AND e.change_xid = l.event_xid AND e.seq = l.event_seq;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_record_many(p_w uuid[], p_e uuid[], p_x bigint[], p_s bigint[], p_a int[], p_o text[],
                                    p_n timestamptz[], p_r int[], p_d int[], p_er text[])
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    ok_w uuid[]; ok_e uuid[];
    gone_w uuid[]; gone_e uuid[];
    fail_w uuid[]; fail_e uuid[]; fail_first timestamptz[];
    n int;
BEGIN
    WITH t AS (
        SELECT * FROM unnest(p_w, p_e, p_x, p_s, p_a, p_o, p_n, p_r, p_d, p_er) AS t(w, e, x, s, a, o, nx, r, d, er)
    ), done AS (
        DELETE FROM webhook_deliveries d USING t
        WHERE t.o = 'succeeded' AND d.workspace_id = t.w AND d.endpoint_id = t.e
          AND d.event_xid = t.x AND d.event_seq = t.s AND d.attempts = t.a AND d.status = 'pending'
        RETURNING d.workspace_id, d.endpoint_id, d.event_id, d.event_type, d.first_attempt_at, t.a, t.o, t.r, t.d, t.er
    ), kept AS (
        UPDATE webhook_deliveries d
        SET status = CASE t.o WHEN 'retry' THEN 'pending' ELSE 'failed' END,
            next_attempt_at = CASE WHEN t.nx < '1900-01-01' THEN d.next_attempt_at ELSE t.nx END, lease_until = NULL
        FROM t
        WHERE t.o <> 'succeeded' AND d.workspace_id = t.w AND d.endpoint_id = t.e
          AND d.event_xid = t.x AND d.event_seq = t.s AND d.attempts = t.a AND d.status = 'pending'
        RETURNING d.workspace_id, d.endpoint_id, d.event_id, d.event_type, d.first_attempt_at, t.a, t.o, t.r, t.d, t.er
    ), ended AS (
        SELECT * FROM done UNION ALL SELECT * FROM kept
    ), logged AS (
        INSERT INTO webhook_attempts (workspace_id, endpoint_id, event_id, event_type, attempt, status, response_status,
                                      duration_ms, error)
        SELECT workspace_id, endpoint_id, event_id, event_type, a,
               CASE o WHEN 'succeeded' THEN 'succeeded' WHEN 'retry' THEN 'pending' ELSE 'failed' END,
               nullif(r, 0), d, nullif(er, '')
        FROM ended
    )
    SELECT count(*),
           array_agg(workspace_id) FILTER (WHERE o = 'succeeded'), array_agg(endpoint_id) FILTER (WHERE o = 'succeeded'),
           array_agg(workspace_id) FILTER (WHERE o = 'gone'), array_agg(endpoint_id) FILTER (WHERE o = 'gone'),
           array_agg(workspace_id) FILTER (WHERE o = 'failed'), array_agg(endpoint_id) FILTER (WHERE o = 'failed'),
           array_agg(first_attempt_at) FILTER (WHERE o = 'failed')
    INTO n, ok_w, ok_e, gone_w, gone_e, fail_w, fail_e, fail_first
    FROM ended;
    IF ok_w IS NOT NULL THEN
        UPDATE webhook_endpoints w SET last_success_at = now()
        FROM (SELECT DISTINCT u.w, u.e FROM unnest(ok_w, ok_e) AS u(w, e)) u
        WHERE w.workspace_id = u.w AND w.id = u.e
          AND (w.last_success_at IS NULL OR w.last_success_at < now() - interval '1 second');
    END IF;
    IF gone_w IS NOT NULL THEN
        UPDATE webhook_endpoints w SET status = 'disabled', disabled_reason = 'gone', updated_at = now()
        FROM (SELECT DISTINCT u.w, u.e FROM unnest(gone_w, gone_e) AS u(w, e)) u
        WHERE w.workspace_id = u.w AND w.id = u.e AND w.status = 'enabled';
    END IF;
    IF fail_w IS NOT NULL THEN
        UPDATE webhook_endpoints w SET status = 'disabled', disabled_reason = 'failing', updated_at = now()
        FROM (SELECT u.w, u.e, max(u.f) AS f FROM unnest(fail_w, fail_e, fail_first) AS u(w, e, f) GROUP BY u.w, u.e) u
        WHERE w.workspace_id = u.w AND w.id = u.e AND w.status = 'enabled'
          AND (w.last_success_at IS NULL OR w.last_success_at < u.f);
    END IF;
    RETURN n;
END
$$;
-- +goose StatementEnd

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
