-- webhook_attempts_end records the ends of a group of attempts (the
-- engine's workers share one call and one commit, as the token and lead
-- writes share theirs), and returns how many still held their lease. Each
-- item ends the attempt it names (its delivery with that many attempts,
-- still pending): succeeded deletes the delivery, retry makes it due at
-- next_attempt_at, gone and failed give it up; every ended one is logged
-- in webhook_attempts. NULL is none: a NULL next_attempt_at keeps the
-- delivery's, a NULL response_status or error is logged as NULL. An
-- endpoint that succeeded notes it (at most once a second), a gone one is
-- disabled at once, a failed one once nothing succeeded since the
-- delivery's first attempt. An endpoint's attempts that timed out add to
-- its timeouts (webhook_claim_due gives it one slot from two on), and any
-- answer (an HTTP status, success or not) clears them: a receiver that
-- answers holds no worker for long, whatever it answers.
CREATE OR REPLACE FUNCTION webhook_attempts_end(p_ends webhook_attempt_end[])
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    ok_w uuid[]; ok_e uuid[];
    gone_w uuid[]; gone_e uuid[];
    fail_w uuid[]; fail_e uuid[]; fail_first timestamptz[];
    ans_w uuid[]; ans_e uuid[];
    late_w uuid[]; late_e uuid[];
    n int;
BEGIN
    -- An attempt, a claim or a fan-out lost to a crash is made again
    -- (at least once), so none waits for its commit to be flushed.
    PERFORM set_config('synchronous_commit', 'off', true);
    WITH t AS (
        SELECT * FROM unnest(p_ends)
    ), done AS (
        DELETE FROM webhook_deliveries d USING t
        WHERE t.outcome = 'succeeded' AND d.workspace_id = t.workspace_id AND d.endpoint_id = t.endpoint_id
          AND d.event_xid = t.event_xid AND d.event_seq = t.event_seq AND d.attempts = t.attempt AND d.status = 'pending'
        RETURNING d.workspace_id, d.endpoint_id, d.event_id, d.event_type, d.first_attempt_at,
                  t.attempt, t.outcome, t.response_status, t.duration_ms, t.error
    ), kept AS (
        UPDATE webhook_deliveries d
        SET status = CASE t.outcome WHEN 'retry' THEN 'pending' ELSE 'failed' END,
            next_attempt_at = coalesce(t.next_attempt_at, d.next_attempt_at), lease_until = NULL
        FROM t
        WHERE t.outcome <> 'succeeded' AND d.workspace_id = t.workspace_id AND d.endpoint_id = t.endpoint_id
          AND d.event_xid = t.event_xid AND d.event_seq = t.event_seq AND d.attempts = t.attempt AND d.status = 'pending'
        RETURNING d.workspace_id, d.endpoint_id, d.event_id, d.event_type, d.first_attempt_at,
                  t.attempt, t.outcome, t.response_status, t.duration_ms, t.error
    ), ended AS (
        SELECT * FROM done UNION ALL SELECT * FROM kept
    ), logged AS (
        INSERT INTO webhook_attempts (workspace_id, endpoint_id, event_id, event_type, attempt, status, response_status,
                                      duration_ms, error)
        SELECT ended.workspace_id, ended.endpoint_id, ended.event_id, ended.event_type, ended.attempt,
               CASE ended.outcome WHEN 'succeeded' THEN 'succeeded' WHEN 'retry' THEN 'pending' ELSE 'failed' END,
               ended.response_status, ended.duration_ms, ended.error
        FROM ended
    )
    SELECT count(*)::int,
           array_agg(ended.workspace_id) FILTER (WHERE ended.outcome = 'succeeded'),
           array_agg(ended.endpoint_id) FILTER (WHERE ended.outcome = 'succeeded'),
           array_agg(ended.workspace_id) FILTER (WHERE ended.outcome = 'gone'),
           array_agg(ended.endpoint_id) FILTER (WHERE ended.outcome = 'gone'),
           array_agg(ended.workspace_id) FILTER (WHERE ended.outcome = 'failed'),
           array_agg(ended.endpoint_id) FILTER (WHERE ended.outcome = 'failed'),
           array_agg(ended.first_attempt_at) FILTER (WHERE ended.outcome = 'failed'),
           array_agg(ended.workspace_id) FILTER (WHERE ended.response_status IS NOT NULL AND ended.outcome <> 'succeeded'),
           array_agg(ended.endpoint_id) FILTER (WHERE ended.response_status IS NOT NULL AND ended.outcome <> 'succeeded'),
           array_agg(ended.workspace_id) FILTER (WHERE ended.error = 'timeout'),
           array_agg(ended.endpoint_id) FILTER (WHERE ended.error = 'timeout')
    INTO n, ok_w, ok_e, gone_w, gone_e, fail_w, fail_e, fail_first, ans_w, ans_e, late_w, late_e
    FROM ended;
    -- A success is noted at most once a second, and clears the endpoint's
    -- timeouts (a write only when it has some: the rows of a healthy
    -- endpoint are written once a second, as before).
    IF ok_w IS NOT NULL THEN
        UPDATE webhook_endpoints w
        SET last_success_at = CASE WHEN w.last_success_at IS NULL OR w.last_success_at < now() - interval '1 second'
                                   THEN now() ELSE w.last_success_at END,
            timeouts = NULL
        FROM (SELECT DISTINCT u.w, u.e FROM unnest(ok_w, ok_e) AS u(w, e)) u
        WHERE w.workspace_id = u.w AND w.id = u.e
          AND (w.last_success_at IS NULL OR w.last_success_at < now() - interval '1 second' OR w.timeouts IS NOT NULL);
    END IF;
    -- Any other answer (a non-2xx status) clears them too.
    IF ans_w IS NOT NULL THEN
        UPDATE webhook_endpoints w SET timeouts = NULL
        FROM (SELECT DISTINCT a.w, a.e FROM unnest(ans_w, ans_e) AS a(w, e)) u
        WHERE w.workspace_id = u.w AND w.id = u.e AND w.timeouts IS NOT NULL;
    END IF;
    -- Timeouts count where nothing of the same group answered.
    IF late_w IS NOT NULL THEN
        UPDATE webhook_endpoints w SET timeouts = coalesce(w.timeouts, 0) + u.n
        FROM (SELECT l.w, l.e, count(*)::int AS n FROM unnest(late_w, late_e) AS l(w, e) GROUP BY l.w, l.e) u
        WHERE w.workspace_id = u.w AND w.id = u.e
          AND NOT EXISTS (SELECT 1 FROM unnest(ok_w || ans_w, ok_e || ans_e) AS a(w, e) WHERE a.w = u.w AND a.e = u.e);
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
