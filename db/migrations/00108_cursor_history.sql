-- +goose Up

-- Sync and events cursors are positions in the transaction-id order of
-- one history of the database (migration 00011). A failover can discard
-- the last transactions of the old primary (committed there, never
-- replicated), and the new primary hands their ids out again: a cursor
-- that read them points past the new history, and the rows committed
-- since would fall behind it, skipped for good. These functions let a page
-- stamp its cursors with where they were read, the primary's timeline and
-- WAL insert position, and refuse, in the page's own statement, a cursor
-- the current history cannot serve (cursor_expired, 410).

-- partner_history_timeline is the primary's timeline, from the name of the
-- WAL segment being written: pg_walfile_name uses the insert timeline,
-- which changes at the promotion (pg_control_checkpoint() only at the next
-- checkpoint). NULL on a standby, which has no insert position. It and
-- partner_history_position are declared VOLATILE, as what they call is, so
-- that PostgreSQL inlines them: a STABLE SQL function over volatile ones is
-- planned again at every statement that calls it (about 0.1 ms each).
-- +goose StatementBegin
CREATE FUNCTION partner_history_timeline() RETURNS int LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN pg_is_in_recovery() THEN NULL
                ELSE ('x' || substr(pg_walfile_name(pg_current_wal_insert_lsn()), 1, 8))::bit(32)::int END
$$;
-- +goose StatementEnd

-- partner_history_position is the primary's WAL insert position, in bytes:
-- every commit visible to a statement lies before the position read in it.
-- NULL on a standby.
-- +goose StatementBegin
CREATE FUNCTION partner_history_position() RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN pg_is_in_recovery() THEN NULL
                ELSE (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint END
$$;
-- +goose StatementEnd

-- partner_history_check raises SQLSTATE PH410 when a cursor at transaction
-- p_xid, read on timeline p_timeline at WAL position p_position, may point
-- past this primary's history: its transaction id is not yet assigned here
-- (the history went back, e.g. a restore), it was read on another timeline
-- (a failover; which transactions of the old one were kept is not known
-- here, so every cursor of another timeline is refused, once), or on this
-- timeline after the current WAL position (a restore of a copy). A cursor
-- without a timeline (made before this migration) gets the first test
-- only. On a standby nothing is judged: it has no timeline of its own, and
-- is behind the primary by design. The query calls it with parameters
-- only, so PostgreSQL runs it once, before the page's scan, even for an
-- empty page. Always true otherwise.
-- +goose StatementBegin
CREATE FUNCTION partner_history_check(p_xid bigint, p_timeline int, p_position bigint)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
DECLARE
    tl int;
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
    IF tl IS DISTINCT FROM p_timeline THEN
        RAISE EXCEPTION 'cursor past the history of the database'
            USING ERRCODE = 'PH410', DETAIL = format('read on timeline %s, now on timeline %s', p_timeline, tl);
    END IF;
    IF p_position > partner_history_position() THEN
        RAISE EXCEPTION 'cursor past the history of the database'
            USING ERRCODE = 'PH410', DETAIL = format('read at WAL position %s, now at %s', p_position, partner_history_position());
    END IF;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION partner_history_check(bigint, int, bigint);
DROP FUNCTION partner_history_position();
DROP FUNCTION partner_history_timeline();
