-- kept for release 1.0.0: only the previous release calls it; drop it once PREVIOUS_RELEASE moves past 1.0.0.
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
    SELECT count(*)::int,
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
