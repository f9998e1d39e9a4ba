-- webhook_fanout_bounded moves the event feed into deliveries: for at most
-- p_endpoints enabled endpoints with events after their place in the feed
-- (another replica's are skipped), at most p_events events each, a
-- delivery of each event the endpoint subscribes to, and its place moved
-- over them. moved is how many deliveries it made; enabled says whether
-- any endpoint of the database is enabled (with none, it does nothing
-- more: the engine rests its fan-outs a while, since the writes that wake
-- it have nowhere to go; the check spares the snapshot and the locking
-- scan of the endpoints, about 0.25 ms, up to 50 times a second while
-- writes flow).
--
-- The backlog bound: an endpoint's pending deliveries never pass
-- p_max_pending. The fan-out adds only as many as are left under it and
-- moves the endpoint's place over those alone: the rest stays in the feed
-- (the buffer that was always there), and is moved once deliveries end:
-- held counts the endpoints it held so (the engine fans out again within
-- a second while there are some, so that one is refilled without a write
-- to wake it).
-- An endpoint held at the bound this way is disabled ('backlog') when it
-- is not taking its deliveries: no success and no change of the endpoint
-- (its enabling included) for p_stall_ms, while its client is active (an
-- inactive client's endpoints wait, by rule, and are held only). Enabled
-- again, it resumes: its deliveries are due again (WebhookResume) and the
-- fan-out goes on from its place. A receiver that is alive but slower than
-- the writes is held at the bound, not disabled; one that is down fills
-- to the bound and is disabled.
--
-- The count of an endpoint's pending deliveries is its pending_ceiling
-- (an upper bound: the last count, plus what the fan-out made since),
-- counted again (capped at the bound) when unknown, or when within
-- p_events of the bound and last counted over a second ago: a healthy
-- endpoint is counted about once per p_max_pending deliveries, one held
-- at the bound once a second at most. One that may be disabled (quiet
-- for p_stall_ms) is counted at every fan-out near the bound, so that it
-- is disabled on a count, never on the ceiling alone.
--
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
CREATE OR REPLACE FUNCTION webhook_fanout_bounded(p_endpoints int, p_events int, p_max_pending int, p_stall_ms int,
                                                  OUT enabled bool, OUT moved int, OUT held int)
LANGUAGE plpgsql AS $$
DECLARE
    horizon bigint;
    ep record;
    ceiling bigint;
    counted timestamptz;
    room bigint;
    made int;
    kept bool;
    quiet bool;
    stalled bool;
    lx bigint;
    ls bigint;
BEGIN
    moved := 0;
    held := 0;
    enabled := EXISTS (SELECT 1 FROM webhook_endpoints w WHERE w.status = 'enabled');
    IF NOT enabled THEN
        RETURN;
    END IF;
    -- An attempt, a claim or a fan-out lost to a crash is made again
    -- (at least once), so none waits for its commit to be flushed.
    PERFORM set_config('synchronous_commit', 'off', true);
    horizon := partner_sync_horizon();
    FOR ep IN SELECT w.workspace_id, w.id, w.event_types, w.after_xid, w.after_seq, w.pending_ceiling,
                     w.pending_counted_at, greatest(w.last_success_at, w.updated_at) AS last_sign,
                     cl.status = 'active' AS active
              FROM webhook_endpoints w
              JOIN api_clients cl ON cl.workspace_id = w.workspace_id AND cl.id = w.client_id
              WHERE w.status = 'enabled' AND EXISTS (
                  SELECT 1 FROM events e WHERE e.workspace_id = w.workspace_id AND e.change_xid < horizon
                    AND (e.change_xid, e.seq) > (w.after_xid, w.after_seq))
              LIMIT p_endpoints FOR UPDATE OF w SKIP LOCKED LOOP
        ceiling := ep.pending_ceiling;
        counted := ep.pending_counted_at;
        -- An endpoint that may be disabled is judged on a count of now.
        quiet := ep.active AND ep.last_sign < now() - make_interval(secs => p_stall_ms / 1000.0);
        IF ceiling IS NULL OR (ceiling > p_max_pending - p_events
                               AND (quiet OR counted IS NULL OR counted < now() - interval '1 second')) THEN
            SELECT count(*) INTO ceiling FROM (
                SELECT 1 FROM webhook_deliveries d
                WHERE d.workspace_id = ep.workspace_id AND d.endpoint_id = ep.id AND d.status = 'pending'
                LIMIT p_max_pending) AS x;
            counted := now();
        END IF;
        room := greatest(p_max_pending - ceiling, 0);
        -- n numbers the events the endpoint subscribes to: those up to the
        -- room left are taken, with every other event before the first
        -- one that is not.
        WITH ev AS (
            SELECT e.change_xid, e.seq, e.id, e.type, e.record_id, e.type = ANY (ep.event_types) AS wanted FROM events e
            WHERE e.workspace_id = ep.workspace_id AND e.change_xid < horizon
              AND (e.change_xid, e.seq) > (ep.after_xid, ep.after_seq)
            ORDER BY e.change_xid, e.seq
            LIMIT p_events
        ), numbered AS (
            SELECT ev.*, count(*) FILTER (WHERE ev.wanted) OVER (ORDER BY ev.change_xid, ev.seq) AS n FROM ev
        ), taken AS (
            SELECT * FROM numbered WHERE numbered.n <= room
        ), ins AS (
            INSERT INTO webhook_deliveries (workspace_id, endpoint_id, event_xid, event_seq, event_id, event_type, record_id)
            SELECT ep.workspace_id, ep.id, taken.change_xid, taken.seq, taken.id, taken.type, taken.record_id
            FROM taken WHERE taken.wanted
            ON CONFLICT DO NOTHING
            RETURNING 1
        ), last AS (
            SELECT taken.change_xid, taken.seq FROM taken ORDER BY taken.change_xid DESC, taken.seq DESC LIMIT 1
        )
        SELECT (SELECT count(*)::int FROM ins), (SELECT last.change_xid FROM last), (SELECT last.seq FROM last),
               EXISTS (SELECT 1 FROM numbered WHERE numbered.n > room)
        INTO made, lx, ls, kept;
        stalled := kept AND quiet;
        IF lx IS NOT NULL OR stalled OR counted IS DISTINCT FROM ep.pending_counted_at THEN
            UPDATE webhook_endpoints w
            SET after_xid = coalesce(lx, w.after_xid), after_seq = coalesce(ls, w.after_seq),
                pending_ceiling = ceiling + made, pending_counted_at = counted,
                status = CASE WHEN stalled THEN 'disabled' ELSE w.status END,
                disabled_reason = CASE WHEN stalled THEN 'backlog' ELSE w.disabled_reason END,
                updated_at = CASE WHEN stalled THEN now() ELSE w.updated_at END
            WHERE w.workspace_id = ep.workspace_id AND w.id = ep.id;
        END IF;
        moved := moved + made;
        IF kept AND NOT stalled THEN
            held := held + 1;
        END IF;
    END LOOP;
END
$$;
