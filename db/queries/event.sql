-- EventList is the event feed: the workspace's events of the given types
-- in the order they became visible, (change_xid, seq), and only below the
-- snapshot's xmin, so that no event can still appear behind the position
-- (the sync walk's rule, migration 00011).
-- name: EventList :many
SELECT change_xid, seq, id, type, record_id, object, changed, created_at FROM events
WHERE workspace_id = @workspace_id
  AND change_xid < partner_sync_horizon()
  AND (change_xid, seq) > (@after_xid::bigint, @after_seq::bigint)
  AND type = ANY (@types::text[])
ORDER BY change_xid, seq
LIMIT @max_rows;

-- EventDeleteExpired removes up to max_rows events older than cutoff, the
-- oldest first (the retention sweep; bounded per run).
-- name: EventDeleteExpired :execrows
DELETE FROM events
WHERE (workspace_id, change_xid, seq) IN (
    SELECT e.workspace_id, e.change_xid, e.seq FROM events AS e
    WHERE e.created_at < @cutoff
    LIMIT @max_rows);
