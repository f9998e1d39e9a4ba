-- +goose Up

-- The event feed (docs/architecture.md, "Events"). Every committed create,
-- update or delete of a contact or a lead writes one event in the same
-- transaction, from statement-level triggers over the transition tables,
-- so that no write path (a single create, a batch, lead_create_set's
-- inline contacts, a PATCH, a delete) can forget it, and a write that
-- rolls back takes its events with it.
--
-- Within one transaction the events of one record coalesce into what the
-- transaction did to it as a whole, since only that was ever visible: a
-- record created and then updated is one created event with the final
-- object; updated twice, one updated event with both sets of changed
-- columns; created and then deleted (lead_create_set removes an inline
-- contact no created lead uses), no event at all. An update that changes
-- no column but updated_at and change_xid writes none.
--
-- object is the row after the change, as to_jsonb writes it; the service
-- renders it as GET answers the record. A delete erases the object of the
-- record's earlier events (erasure: the events stay, with the id only),
-- and its own event carries none.
--
-- The feed is ordered as the sync walk is (migration 00011): by change_xid
-- and served only below the reader's snapshot xmin, then by seq within a
-- transaction.
CREATE TABLE events (
    workspace_id  uuid NOT NULL REFERENCES workspaces (id),
    change_xid    bigint NOT NULL DEFAULT partner_change_xid(),
    seq           bigint GENERATED ALWAYS AS IDENTITY,
    id            uuid NOT NULL DEFAULT gen_random_uuid(),
    type          text NOT NULL CHECK (type IN ('contact.created', 'contact.updated', 'contact.deleted',
                                                'lead.created', 'lead.updated', 'lead.deleted')),
    record_id     uuid NOT NULL,
    object        jsonb,
    changed       text[],
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, change_xid, seq)
);

-- The record's events: erasure, and the coalescing above.
CREATE INDEX events_record ON events (workspace_id, record_id);
-- The retention sweep walks by age; BRIN costs the inserts next to nothing.
CREATE INDEX events_created ON events USING brin (created_at);

-- partner_record_events writes the events of one statement on contacts or
-- leads (TG_ARGV[0] is 'contact' or 'lead').
-- +goose StatementBegin
CREATE FUNCTION partner_record_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    kind text := TG_ARGV[0];
    xid bigint := pg_current_xact_id()::text::bigint;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO events (workspace_id, change_xid, type, record_id, object)
        SELECT n.workspace_id, xid, kind || '.created', n.id, to_jsonb(n) FROM new_rows n;
    ELSIF TG_OP = 'UPDATE' THEN
        WITH changes AS (
            SELECT n.workspace_id, n.id, to_jsonb(n) AS object,
                   ARRAY(SELECT a.key FROM jsonb_each(to_jsonb(n)) a
                         WHERE a.key NOT IN ('change_xid', 'updated_at')
                           AND a.value IS DISTINCT FROM to_jsonb(o) -> a.key
                         ORDER BY a.key) AS changed
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
-- +goose StatementEnd

CREATE TRIGGER contacts_events_insert AFTER INSERT ON contacts
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION partner_record_events('contact');
CREATE TRIGGER contacts_events_update AFTER UPDATE ON contacts
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION partner_record_events('contact');
CREATE TRIGGER contacts_events_delete AFTER DELETE ON contacts
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION partner_record_events('contact');
CREATE TRIGGER leads_events_insert AFTER INSERT ON leads
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION partner_record_events('lead');
CREATE TRIGGER leads_events_update AFTER UPDATE ON leads
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION partner_record_events('lead');
CREATE TRIGGER leads_events_delete AFTER DELETE ON leads
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION partner_record_events('lead');

-- +goose Down
DROP TRIGGER leads_events_delete ON leads;
DROP TRIGGER leads_events_update ON leads;
DROP TRIGGER leads_events_insert ON leads;
DROP TRIGGER contacts_events_delete ON contacts;
DROP TRIGGER contacts_events_update ON contacts;
DROP TRIGGER contacts_events_insert ON contacts;
DROP FUNCTION partner_record_events();
DROP TABLE events;
