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
CREATE OR REPLACE FUNCTION partner_history_began() RETURNS pg_lsn LANGUAGE plpgsql VOLATILE AS $$
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
