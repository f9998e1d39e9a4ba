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
        SELECT (SELECT count(*)::int FROM ins), (SELECT change_xid FROM last), (SELECT seq FROM last) INTO made, lx, ls;
        IF lx IS NOT NULL THEN
            UPDATE webhook_endpoints SET after_xid = lx, after_seq = ls
            WHERE workspace_id = ep.workspace_id AND id = ep.id;
        END IF;
        total := total + made;
    END LOOP;
    RETURN total;
END
$$;
