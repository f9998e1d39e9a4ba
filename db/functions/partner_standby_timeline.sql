-- partner_standby_timeline is the timeline a standby replays, as far as it
-- can be known without a superuser: the timeline its WAL receiver streams
-- (visible with the privileges of pg_read_all_stats), else that of its
-- last restartpoint, which is never later than the one replayed. A
-- timeline too old only makes its cursors refused after a failover, never
-- served with a gap: what a standby read at a position on timeline T is
-- also in the history of T's children up to where they forked off, and a
-- streamed timeline is never one that forked off before the standby's
-- replay position (the standby could not follow it).
CREATE OR REPLACE FUNCTION partner_standby_timeline() RETURNS int LANGUAGE sql VOLATILE AS $$
    SELECT greatest((SELECT r.received_tli FROM pg_stat_wal_receiver r),
                    (SELECT c.timeline_id FROM pg_control_checkpoint() c))
$$;
