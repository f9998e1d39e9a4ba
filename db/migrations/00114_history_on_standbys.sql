-- +goose Up

-- Reads on standbys (PARTNER_READ_DATABASE_URL): the sync walk and the
-- events feed may be served by a hot standby. Their pages stamp the
-- cursors they make with where they were read (migration 00108), and a
-- cursor the current history cannot serve is refused in the page's own
-- statement; until now both were a primary's alone (NULL, and "not
-- judged", on a standby), so a cursor read on a standby that had replayed
-- transactions a failover then discarded carried no timeline, and a
-- standby served any cursor. This migration gives a standby the same two
-- answers. What a standby's snapshot shows is gap-free as it is: its xmin
-- is below every transaction it has not seen end, and transactions end on
-- a standby in the order their records were written, as on the primary.

-- partner_standby_timeline is the timeline a standby replays, as far as it
-- can be known without a superuser: the timeline its WAL receiver streams
-- (visible with the privileges of pg_read_all_stats), else that of its
-- last restartpoint, which is never later than the one replayed. A
-- timeline too old only makes its cursors refused after a failover, never
-- served with a gap: what a standby read at a position on timeline T is
-- also in the history of T's children up to where they forked off, and a
-- streamed timeline is never one that forked off before the standby's
-- replay position (the standby could not follow it).
-- +goose StatementBegin
CREATE FUNCTION partner_standby_timeline() RETURNS int LANGUAGE sql VOLATILE AS $$
    SELECT greatest((SELECT r.received_tli FROM pg_stat_wal_receiver r),
                    (SELECT c.timeline_id FROM pg_control_checkpoint() c))
$$;
-- +goose StatementEnd

-- partner_history_timeline is the function of migration 00108, and on a
-- standby partner_standby_timeline() instead of NULL. The primary's branch
-- is unchanged, and the function is still inlined.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION partner_history_timeline() RETURNS int LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN pg_is_in_recovery() THEN partner_standby_timeline()
                ELSE ('x' || substr(pg_walfile_name(pg_current_wal_insert_lsn()), 1, 8))::bit(32)::int END
$$;
-- +goose StatementEnd

-- partner_history_position is the function of migration 00108, and on a
-- standby the end of the WAL it has received (else replayed), in bytes:
-- every commit its snapshots show was replayed, so lies before it. (The
-- replay position alone is noted just after a record's effects are
-- visible; the received position never lags them.) Past what was
-- replayed, it only makes a cursor refused after a failover that forked
-- off in between.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION partner_history_position() RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN pg_is_in_recovery()
                THEN (greatest(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()) - '0/0'::pg_lsn)::bigint
                ELSE (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint END
$$;
-- +goose StatementEnd

-- partner_history_check is the function of migration 00110, judged on a
-- standby too: a cursor read on an older timeline than the standby's is
-- served iff the history kept what it saw (the history_forks rows are
-- replicated). What a standby cannot judge it does not refuse: a
-- transaction id or a position on its own timeline beyond what it has
-- replayed is a standby behind the cursor, not a history that went back
-- (the service reads on a standby only once it has replayed the
-- primary's position, so this does not happen there).
-- +goose StatementBegin
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
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION partner_history_check(p_xid bigint, p_timeline int, p_position bigint)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
DECLARE
    tl int;
    why text;
BEGIN
    IF p_xid IS NULL OR pg_is_in_recovery() THEN
        RETURN true;
    END IF;
    IF p_xid >= pg_snapshot_xmax(pg_current_snapshot())::text::bigint THEN
        RAISE EXCEPTION 'cursor past the history of the database'
            USING ERRCODE = 'PH410', DETAIL = format('transaction %s is not yet assigned', p_xid);
    END IF;
    IF coalesce(p_timeline, 0) = 0 THEN
        RETURN true;
    END IF;
    tl := partner_history_timeline();
    IF p_timeline = tl THEN
        IF p_position > partner_history_position() THEN
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
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION partner_history_position() RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN pg_is_in_recovery() THEN NULL
                ELSE (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION partner_history_timeline() RETURNS int LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN pg_is_in_recovery() THEN NULL
                ELSE ('x' || substr(pg_walfile_name(pg_current_wal_insert_lsn()), 1, 8))::bit(32)::int END
$$;
-- +goose StatementEnd
DROP FUNCTION partner_standby_timeline();
