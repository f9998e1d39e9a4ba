-- ReplicaMark is where the primary is now: its timeline and the end of
-- the WAL it has flushed (bytes), which every commit acknowledged before
-- it runs ends before (a commit is acknowledged once flushed; the service
-- commits nothing a client reads with synchronous_commit off). Not the
-- insert position: the WAL of transactions still open lies before it,
-- and a standby gets only flushed WAL, so a read would wait for their
-- next flush. Timeline 0 on a standby (a misrouted primary URL): no
-- standby is caught up with it, and reads stay on that pool.
-- name: ReplicaMark :one
SELECT coalesce(CASE WHEN NOT pg_is_in_recovery() THEN partner_history_timeline() END, 0)::int AS timeline,
       coalesce(CASE WHEN NOT pg_is_in_recovery() THEN pg_current_wal_flush_lsn() - '0/0'::pg_lsn END, 0)::bigint AS position;

-- ReplicaCaughtUp says whether the server it runs on shows everything the
-- primary had at a ReplicaMark: it is on the same timeline and has
-- replayed up to the position (a primary, which a prefer-standby URL may
-- reach: flushed up to it).
-- name: ReplicaCaughtUp :one
SELECT coalesce(partner_history_timeline() = sqlc.arg(timeline)::int
    AND CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_flush_lsn() END
        >= '0/0'::pg_lsn + sqlc.arg(position)::bigint, false)::boolean AS caught_up;
