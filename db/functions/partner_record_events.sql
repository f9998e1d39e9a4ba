CREATE OR REPLACE FUNCTION partner_record_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    kind text;
    xid bigint;
BEGIN
    -- lead_create_requests writes the events of its creates itself
    -- (00113); this statement is one of them, and costs no more than
    -- this test.
    IF current_setting('partner.defer_events', true) = 'on' THEN
        RETURN NULL;
    END IF;
    kind := TG_ARGV[0];
    xid := pg_current_xact_id()::text::bigint;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO events (workspace_id, change_xid, type, record_id, object)
        SELECT n.workspace_id, xid, kind || '.created', n.id, to_jsonb(n) FROM new_rows n;
    ELSIF TG_OP = 'UPDATE' THEN
        WITH changes AS (
            SELECT n.workspace_id, n.id, to_jsonb(n) AS object,
                   -- A custom field's change is named by its key
                   -- (custom_fields.budget), not the column.
                   ARRAY(SELECT k FROM (
                             SELECT a.key AS k FROM jsonb_each(to_jsonb(n)) a
                             WHERE a.key NOT IN ('change_xid', 'updated_at', 'custom_fields')
                               AND a.value IS DISTINCT FROM to_jsonb(o) -> a.key
                             UNION ALL
                             SELECT 'custom_fields.' || f.key
                             FROM (SELECT jsonb_object_keys(coalesce(nullif(to_jsonb(n) -> 'custom_fields', 'null'::jsonb), '{}'::jsonb)) AS key
                                   UNION
                                   SELECT jsonb_object_keys(coalesce(nullif(to_jsonb(o) -> 'custom_fields', 'null'::jsonb), '{}'::jsonb))) f
                             WHERE to_jsonb(n) -> 'custom_fields' -> f.key IS DISTINCT FROM to_jsonb(o) -> 'custom_fields' -> f.key
                         ) c
                         ORDER BY k) AS changed
            FROM new_rows n JOIN old_rows o ON o.workspace_id = n.workspace_id AND o.id = n.id
        ), real AS (
            SELECT * FROM changes WHERE cardinality(changed) > 0
        ), merged AS (
            -- An event of this transaction for the record takes the change.
            UPDATE events e
            SET object = r.object,
                changed = CASE WHEN e.type LIKE '%.updated'
                               THEN ARRAY(SELECT DISTINCT c FROM unnest(e.changed || r.changed) c ORDER BY c) END
            FROM real r
            WHERE e.workspace_id = r.workspace_id AND e.record_id = r.id AND e.change_xid = xid
            RETURNING e.record_id
        )
        INSERT INTO events (workspace_id, change_xid, type, record_id, object, changed)
        SELECT r.workspace_id, xid, kind || '.updated', r.id, r.object, r.changed || '{updated_at}'
        FROM real r
        WHERE r.id NOT IN (SELECT record_id FROM merged);
    ELSE
        WITH gone AS (
            -- This transaction's own events of the record go: its net
            -- effect is the delete, or nothing at all for a record it
            -- created (never visible, so no event).
            DELETE FROM events e USING old_rows o
            WHERE e.workspace_id = o.workspace_id AND e.record_id = o.id AND e.change_xid = xid
            RETURNING e.record_id, e.type
        ), erased AS (
            UPDATE events e SET object = NULL, changed = NULL
            FROM old_rows o
            WHERE e.workspace_id = o.workspace_id AND e.record_id = o.id AND e.change_xid <> xid
              AND e.object IS NOT NULL
        )
        INSERT INTO events (workspace_id, change_xid, type, record_id)
        SELECT o.workspace_id, xid, kind || '.deleted', o.id
        FROM old_rows o
        WHERE o.id NOT IN (SELECT record_id FROM gone WHERE type = kind || '.created');
    END IF;
    RETURN NULL;
END
$$;
