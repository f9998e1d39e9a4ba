-- HistoryCheck refuses (SQLSTATE PH410) a cursor at transaction xid, read
-- on timeline at WAL position, that may point past the database's history
-- (migration 00108), for a statement that takes a cursor without paging
-- from it: a webhook replay. Run it in the transaction that uses the
-- position, so that both meet the same server.
-- name: HistoryCheck :one
SELECT partner_history_check(@xid::bigint, sqlc.narg(timeline)::int, sqlc.narg(position)::bigint)::boolean AS ok;

-- HistoryNow is where the server is in its history: its timeline and WAL
-- insert position (on a standby, migration 00114: the timeline it replays
-- and the end of the WAL it has received), and the next transaction id it
-- will assign.
-- name: HistoryNow :one
SELECT coalesce(partner_history_timeline(), 0)::int AS timeline,
       coalesce(partner_history_position(), 0)::bigint AS position,
       pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS next_xid;

-- HistoryNote records where the primary's current timeline began, the
-- first time it runs there (migration 00110), so that cursors read before
-- a failover that the new history kept are still served after a restart
-- of the new primary. It never fails on a standby or a read-only
-- connection; noted says whether it wrote the record.
-- name: HistoryNote :one
SELECT partner_history_note()::boolean AS noted;
