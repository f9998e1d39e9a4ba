-- EventList is the event feed: the workspace's events of the given types
-- in the order they became visible, (change_xid, seq), and only below the
-- snapshot's xmin, so that no event can still appear behind the position
-- (the sync walk's rule, migration 00011). A cursor (check_xid, with where
-- it was read) that may point past the database's history is refused
-- (SQLSTATE PH410), and the page tells where it was read (migration 00108).
-- name: EventList :many
SELECT change_xid, seq, id, type, record_id, object, changed, created_at,
       coalesce((SELECT partner_history_timeline()), 0)::int AS history_timeline,
       coalesce((SELECT partner_history_position()), 0)::bigint AS history_position
FROM events
WHERE workspace_id = @workspace_id
  AND partner_history_check(sqlc.narg(check_xid)::bigint, sqlc.narg(check_timeline)::int, sqlc.narg(check_position)::bigint)
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

-- EventEraseContactCopies erases the objects of the earlier events of
-- lead_ids (the leads LeadRetitleErased just retitled) that hold a contact
-- being erased: its id or its default title (erased_title). The contact's
-- own events are erased by the delete trigger; these are copies in other
-- records' events. A namesake's lead (another contact with the same name)
-- is not retitled, so its events stay. The events are read by record
-- (events_record), never the workspace's whole feed.
-- name: EventEraseContactCopies :execrows
UPDATE events SET object = NULL, changed = NULL
WHERE workspace_id = @workspace_id AND record_id = ANY (@lead_ids::uuid[]) AND object IS NOT NULL
  AND (object ->> 'contact_id' = @contact_id::text OR object ->> 'title' = @erased_title::text);
