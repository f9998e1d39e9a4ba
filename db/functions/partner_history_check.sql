-- partner_history_check is the function of migration 00110, judged on a
-- standby too: a cursor read on an older timeline than the standby's is
-- served iff the history kept what it saw (the history_forks rows are
-- replicated). What a standby cannot judge it does not refuse: a
-- transaction id or a position on its own timeline beyond what it has
-- replayed is a standby behind the cursor, not a history that went back
-- (the service reads on a standby only once it has replayed the
-- primary's position, so this does not happen there).
CREATE OR REPLACE FUNCTION partner_history_check(p_xid bigint, p_timeline int, p_position bigint)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
DECLARE
    tl int;
    why text;
    standby boolean := pg_is_in_recovery();
BEGIN
    IF p_xid IS NULL THEN
        RETURN true;
    END IF;
    IF NOT standby AND p_xid >= pg_snapshot_xmax(pg_current_snapshot())::text::bigint THEN
        RAISE EXCEPTION 'cursor past the history of the database'
            USING ERRCODE = 'PH410', DETAIL = format('transaction %s is not yet assigned', p_xid);
    END IF;
    IF coalesce(p_timeline, 0) = 0 THEN
        RETURN true;
    END IF;
    tl := partner_history_timeline();
    IF tl IS NULL OR (standby AND p_timeline > tl) THEN
        RETURN true; -- a standby behind a failover: not known here
    END IF;
    IF p_timeline = tl THEN
        IF NOT standby AND p_position > partner_history_position() THEN
            RAISE EXCEPTION 'cursor past the history of the database'
                USING ERRCODE = 'PH410', DETAIL = format('read at WAL position %s, now at %s', p_position, partner_history_position());
        END IF;
        RETURN true;
    END IF;
    why := partner_history_kept(p_timeline, p_position, tl, partner_history_began());
    IF why IS NOT NULL THEN
        RAISE EXCEPTION 'cursor past the history of the database'
            USING ERRCODE = 'PH410', DETAIL = why;
    END IF;
    RETURN true;
END
$$;
