-- +goose Up

-- A delivery that succeeded leaves webhook_deliveries at once (make
-- bench, scenario (g)): kept with status 'succeeded', the delivered rows
-- sat in front of the pending ones in every per-endpoint scan, so a claim
-- cost grew with what had been delivered (18 ms a candidate scan, 70 ms a
-- claim, after 10,000 deliveries to 4 endpoints). Nothing reads them: the
-- delivery log is webhook_attempts, and a replay makes a delivery anew
-- when it has none. Given-up ('failed') deliveries stay, for a re-enable to
-- resume from them.
DELETE FROM webhook_deliveries WHERE status = 'succeeded';

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_record(p_workspace_id uuid, p_endpoint_id uuid, p_xid bigint, p_seq bigint, p_attempts int,
                                          p_outcome text, p_next timestamptz, p_response_status int, p_duration_ms int,
                                          p_error text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    d webhook_deliveries;
BEGIN
    IF p_outcome = 'succeeded' THEN
        DELETE FROM webhook_deliveries
        WHERE workspace_id = p_workspace_id AND endpoint_id = p_endpoint_id AND event_xid = p_xid AND event_seq = p_seq
          AND attempts = p_attempts AND status = 'pending'
        RETURNING * INTO d;
    ELSE
        UPDATE webhook_deliveries
        SET status = CASE p_outcome WHEN 'retry' THEN 'pending' ELSE 'failed' END,
            next_attempt_at = coalesce(p_next, next_attempt_at), lease_until = NULL
        WHERE workspace_id = p_workspace_id AND endpoint_id = p_endpoint_id AND event_xid = p_xid AND event_seq = p_seq
          AND attempts = p_attempts AND status = 'pending'
        RETURNING * INTO d;
    END IF;
    IF d.endpoint_id IS NULL THEN
        RETURN false;
    END IF;
    INSERT INTO webhook_attempts (workspace_id, endpoint_id, event_id, event_type, attempt, status, response_status,
                                  duration_ms, error)
    VALUES (p_workspace_id, p_endpoint_id, d.event_id, d.event_type, p_attempts,
            CASE p_outcome WHEN 'succeeded' THEN 'succeeded' WHEN 'retry' THEN 'pending' ELSE 'failed' END,
            p_response_status, p_duration_ms, p_error);
    IF p_outcome = 'succeeded' THEN
        UPDATE webhook_endpoints SET last_success_at = now()
        WHERE workspace_id = p_workspace_id AND id = p_endpoint_id
          AND (last_success_at IS NULL OR last_success_at < now() - interval '1 second');
    ELSIF p_outcome = 'gone' THEN
        UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'gone', updated_at = now()
        WHERE workspace_id = p_workspace_id AND id = p_endpoint_id AND status = 'enabled';
    ELSIF p_outcome = 'failed' THEN
        UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'failing', updated_at = now()
        WHERE workspace_id = p_workspace_id AND id = p_endpoint_id AND status = 'enabled'
          AND (last_success_at IS NULL OR last_success_at < d.first_attempt_at);
    END IF;
    RETURN true;
END
$$;
-- +goose StatementEnd


-- The claim is one statement for every endpoint (it ran three statements
-- a delivery and two an endpoint), and its plans hold when the table's
-- statistics are stale. A
-- PL/pgSQL statement is planned for the table as it is then (the engine
-- now analyses it after a large fan-out, but autovacuum alone came a
-- minute late: a fan-out fills it in a second): plans made for an empty
-- table probed the per-record index by endpoint only, 1,726 rows a probe,
-- and found an endpoint's due work by scanning its workspace (12-90 ms a
-- claim at 20,000 pending). The per-record NOT EXISTS is a sub-plan
-- (OFFSET 0 keeps it from becoming a join), bound on every column of its
-- index; an endpoint's due deliveries are read in due order from an index
-- of their own, which replaces the one in feed order (00105), and whether
-- it has any is the first of them in that order (an EXISTS was planned as
-- a scan of the table).
CREATE INDEX webhook_deliveries_endpoint_due ON webhook_deliveries (workspace_id, endpoint_id, next_attempt_at, event_xid, event_seq)
    WHERE status = 'pending';
DROP INDEX webhook_deliveries_pending;

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

-- webhook_record_many ends a group of attempts (the engine's workers
-- share one call and one commit) in a few statements for the group, where
-- webhook_record ran four for each: succeeded deliveries go, the others
-- are due again at p_next or given up; every attempt goes to the delivery
-- log; then the endpoints: a success is noted (at most once a second), a
-- 410 disables at once, and a delivery given up with no success since its
-- first attempt disables ('failing'). Attempts that no longer hold their
-- lease (a replay or a second claim since) change nothing. A zero
-- p_next, p_status or empty p_error is none.
-- +goose StatementBegin
CREATE FUNCTION webhook_record_many(p_w uuid[], p_e uuid[], p_x bigint[], p_s bigint[], p_a int[], p_o text[],
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

-- +goose Down
DROP FUNCTION webhook_record_many(uuid[], uuid[], bigint[], bigint[], int[], text[], timestamptz[], int[], int[], text[]);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_record(p_workspace_id uuid, p_endpoint_id uuid, p_xid bigint, p_seq bigint, p_attempts int,
                                          p_outcome text, p_next timestamptz, p_response_status int, p_duration_ms int,
                                          p_error text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    d webhook_deliveries;
BEGIN
    UPDATE webhook_deliveries
    SET status = CASE p_outcome WHEN 'succeeded' THEN 'succeeded' WHEN 'retry' THEN 'pending' ELSE 'failed' END,
        next_attempt_at = coalesce(p_next, next_attempt_at), lease_until = NULL
    WHERE workspace_id = p_workspace_id AND endpoint_id = p_endpoint_id AND event_xid = p_xid AND event_seq = p_seq
      AND attempts = p_attempts AND status = 'pending'
    RETURNING * INTO d;
    IF d.endpoint_id IS NULL THEN
        RETURN false;
    END IF;
    INSERT INTO webhook_attempts (workspace_id, endpoint_id, event_id, event_type, attempt, status, response_status,
                                  duration_ms, error)
    VALUES (p_workspace_id, p_endpoint_id, d.event_id, d.event_type, p_attempts,
            CASE p_outcome WHEN 'succeeded' THEN 'succeeded' WHEN 'retry' THEN 'pending' ELSE 'failed' END,
            p_response_status, p_duration_ms, p_error);
    IF p_outcome = 'succeeded' THEN
        UPDATE webhook_endpoints SET last_success_at = now()
        WHERE workspace_id = p_workspace_id AND id = p_endpoint_id
          AND (last_success_at IS NULL OR last_success_at < now() - interval '1 second');
    ELSIF p_outcome = 'gone' THEN
        UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'gone', updated_at = now()
        WHERE workspace_id = p_workspace_id AND id = p_endpoint_id AND status = 'enabled';
    ELSIF p_outcome = 'failed' THEN
        UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'failing', updated_at = now()
        WHERE workspace_id = p_workspace_id AND id = p_endpoint_id AND status = 'enabled'
          AND (last_success_at IS NULL OR last_success_at < d.first_attempt_at);
    END IF;
    RETURN true;
END
$$;
-- +goose StatementEnd
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
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (workspace_id, endpoint_id, event_xid, event_seq)
    WHERE status = 'pending';
DROP INDEX webhook_deliveries_endpoint_due;
