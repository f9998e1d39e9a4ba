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
CREATE OR REPLACE FUNCTION partner_history_kept(p_timeline int, p_position bigint, p_now int, p_began pg_lsn)
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
