-- +goose Up

-- Migration 00108 refuses every cursor read on a timeline other than the
-- primary's own, since it cannot tell which transactions of the old
-- timeline a failover kept. This migration tells: a cursor read on
-- timeline T at WAL insert position L saw only transactions whose commit
-- records end before L, so it is served after a failover iff the current
-- history kept the old timeline up to L, i.e. L is at or before the point
-- where the next timeline of this history forked off T. (Its transaction
-- ids are then safe too: every id below the cursor's was WAL-logged before
-- L, so replay moved the new primary's counter past it.)

-- history_forks records, for each timeline of this history the service
-- has run on as a primary, the WAL position at which it began (its switch
-- point: the end of the last record it kept of its parent timeline), or
-- NULL when that was no longer known when the service first saw it. A row
-- for timeline N exists here only if a primary on timeline N wrote it, so
-- it also says that timeline N is an ancestor of the current history.
CREATE TABLE history_forks (
    timeline int PRIMARY KEY,
    began_at pg_lsn,
    noted_at timestamptz NOT NULL DEFAULT now()
);

-- partner_history_began is where the primary's current timeline began,
-- when that can be known, else NULL (and on a standby). Exactly, from the
-- timeline's history file, when the role may read it (GRANT EXECUTE ON
-- FUNCTION pg_read_file(text) TO the service's role): its last line names
-- the parent timeline and the switch point. Otherwise from
-- pg_last_wal_replay_lsn(), which on a standby promoted without a restart
-- stays at the end of the last record replayed: the switch point. After a
-- restart it is NULL, and after a crash recovery it is the end of that
-- recovery, which ends with a checkpoint on the current timeline whose redo
-- position is that very point. So it is trusted only while the last
-- checkpoint is still of an older timeline (nothing but the promotion
-- happened since), or began after the end of the replay (the promotion's
-- own checkpoint, or a later one). What this cannot see: a crash recovery
-- followed by another checkpoint before the service first connects, or
-- one that ended on a torn record (its overwrite record moves the redo
-- position on); why the service records the position on its first
-- connection (partner_history_note).
-- +goose StatementBegin
CREATE FUNCTION partner_history_began() RETURNS pg_lsn LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    tl int;
    began pg_lsn;
BEGIN
    IF pg_is_in_recovery() THEN
        RETURN NULL;
    END IF;
    tl := partner_history_timeline();
    IF tl > 1 AND has_function_privilege('pg_read_file(text)', 'EXECUTE') THEN
        BEGIN
            SELECT split_part(l, E'\t', 2)::pg_lsn INTO began
            FROM regexp_split_to_table(pg_read_file(format('pg_wal/%s.history', lpad(upper(to_hex(tl)), 8, '0'))), E'\n')
                WITH ORDINALITY AS h(l, n)
            WHERE l ~ '^[0-9]+\t' ORDER BY n DESC LIMIT 1;
            IF began IS NOT NULL THEN
                RETURN began;
            END IF;
        EXCEPTION WHEN OTHERS THEN
            NULL; -- as if it could not be read
        END;
    END IF;
    SELECT CASE WHEN c.timeline_id IS DISTINCT FROM tl OR pg_last_wal_replay_lsn() < c.redo_lsn
                THEN pg_last_wal_replay_lsn() END
        INTO began
    FROM pg_control_checkpoint() c;
    RETURN began;
END
$$;
-- +goose StatementEnd

-- partner_history_note records where the primary's current timeline began
-- (NULL when that is not known: then it never will be, and a later guess
-- is not trusted), the first time it is called there. The service calls
-- it on each new connection. It never fails: on a standby, in a read-only
-- transaction, or on any error it records nothing and answers false.
-- +goose StatementBegin
CREATE FUNCTION partner_history_note() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    tl int;
BEGIN
    IF pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on' THEN
        RETURN false;
    END IF;
    tl := partner_history_timeline();
    IF EXISTS (SELECT FROM history_forks WHERE timeline = tl) THEN
        RETURN false;
    END IF;
    -- Not worth waiting for a synchronous standby (a connection would wait
    -- with it): a row lost in a failover only makes cursors of this
    -- timeline refused, as without it.
    PERFORM set_config('synchronous_commit', 'local', true);
    INSERT INTO history_forks (timeline, began_at) VALUES (tl, partner_history_began())
        ON CONFLICT (timeline) DO NOTHING;
    RETURN FOUND;
EXCEPTION WHEN OTHERS THEN
    RETURN false;
END
$$;
-- +goose StatementEnd

-- partner_history_kept answers why a cursor read on timeline p_timeline
-- at WAL position p_position (bytes) may point past the history of a
-- primary on timeline p_now, whose own timeline began at p_began (when its
-- history_forks row does not say), or NULL when the history kept
-- everything the cursor saw. For an older timeline: that timeline must be
-- known to be an ancestor (timeline 1 always is; another needs its row),
-- every timeline after it up to p_now must have a row saying where it
-- began (a gap may be a timeline of another branch, or one whose switch
-- point was not recorded), and the cursor must have been read at or
-- before the switch point of the first of them. A switch point at the
-- start of a WAL page is where the page's header begins; an insert
-- position there is after that header, and nothing lies between them.
-- +goose StatementBegin
CREATE FUNCTION partner_history_kept(p_timeline int, p_position bigint, p_now int, p_began pg_lsn)
RETURNS text LANGUAGE plpgsql STABLE AS $$
DECLARE
    began pg_lsn;
    fork bigint;
    slack int := 0;
BEGIN
    IF p_timeline > p_now THEN
        RETURN format('read on timeline %s, now on timeline %s', p_timeline, p_now);
    END IF;
    IF p_timeline > 1 AND NOT EXISTS (SELECT FROM history_forks WHERE timeline = p_timeline) THEN
        RETURN format('read on timeline %s, not known to be in the history of timeline %s', p_timeline, p_now);
    END IF;
    FOR t IN REVERSE p_now .. p_timeline + 1 LOOP
        SELECT f.began_at INTO began FROM history_forks f WHERE f.timeline = t;
        IF NOT FOUND AND t = p_now THEN
            began := p_began;
        END IF;
        IF began IS NULL THEN
            RETURN format('read on timeline %s; where timeline %s began is not known', p_timeline, t);
        END IF;
    END LOOP;
    fork := (began - '0/0'::pg_lsn)::bigint;
    IF fork % current_setting('wal_block_size')::bigint = 0 THEN
        slack := CASE WHEN fork % pg_size_bytes(current_setting('wal_segment_size')) = 0 THEN 40 ELSE 24 END;
    END IF;
    IF p_position > fork + slack THEN
        RETURN format('read on timeline %s at WAL position %s, after timeline %s began at %s',
                      p_timeline, p_position, p_timeline + 1, began);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- partner_history_check is the function of migration 00108 with the rule
-- for an older timeline made exact: a cursor read before a failover is
-- served iff the new history kept everything it saw
-- (partner_history_kept). The rest is unchanged: a transaction id not yet
-- assigned here, a timeline after the current one, or a position past the
-- current one on the same timeline is refused (SQLSTATE PH410).
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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION partner_history_check(p_xid bigint, p_timeline int, p_position bigint)
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
DROP FUNCTION partner_history_kept(int, bigint, int, pg_lsn);
DROP FUNCTION partner_history_note();
DROP FUNCTION partner_history_began();
DROP TABLE history_forks;
