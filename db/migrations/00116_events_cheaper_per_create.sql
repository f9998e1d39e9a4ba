-- +goose Up

-- The lead-ingest line of issue 22, again (the feed may cost a lead create
-- at most a tenth of its rate). Two of what the feed cost a single create
-- in PostgreSQL, counted in instructions with callgrind on the statement of
-- a group of eight keyed creates (docs/performance.md, "(i)"):
--
-- * The lead's row became JSON twice: once for its idempotency record,
--   once for its event (to_jsonb of the outcome, about 60,000 instructions a
--   lead). It is now made once and used for both; the two were always the
--   same value.
-- * The triggers' WHEN of 00113 was read from its stored text and planned
--   again for every INSERT on contacts or leads, one per create in a group
--   (PostgreSQL keeps a trigger's WHEN per statement): some 22,000
--   instructions a create, to skip the trigger. The triggers now have no
--   WHEN, and partner_record_events returns at once while
--   partner.defer_events is on, which costs less.
--
-- Together they take the statement from 23 % to 11 % above a1529b5's.
-- What the feed writes is unchanged: TestGroupEventsAreTheTriggers compares
-- lead_create_requests' events with the triggers' own on every outcome of
-- a single create.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION partner_record_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    kind text := TG_ARGV[0];
    xid bigint := pg_current_xact_id()::text::bigint;
BEGIN
    -- lead_create_requests writes the events of its creates itself
    -- (00113); this statement is one of them.
    IF current_setting('partner.defer_events', true) = 'on' THEN
        RETURN NULL;
    END IF;
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

DROP TRIGGER contacts_events_insert ON contacts;
CREATE TRIGGER contacts_events_insert AFTER INSERT ON contacts
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION partner_record_events('contact');
DROP TRIGGER contacts_events_update ON contacts;
CREATE TRIGGER contacts_events_update AFTER UPDATE ON contacts
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION partner_record_events('contact');
DROP TRIGGER contacts_events_delete ON contacts;
CREATE TRIGGER contacts_events_delete AFTER DELETE ON contacts
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
    EXECUTE FUNCTION partner_record_events('contact');
DROP TRIGGER leads_events_insert ON leads;
CREATE TRIGGER leads_events_insert AFTER INSERT ON leads
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION partner_record_events('lead');
DROP TRIGGER leads_events_update ON leads;
CREATE TRIGGER leads_events_update AFTER UPDATE ON leads
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION partner_record_events('lead');
DROP TRIGGER leads_events_delete ON leads;
CREATE TRIGGER leads_events_delete AFTER DELETE ON leads
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
    EXECUTE FUNCTION partner_record_events('lead');

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION lead_create_requests(p_requests lead_create_request[], p_lock_budget_ms int)
RETURNS SETOF lead_create_outcome LANGUAGE plpgsql AS $$
DECLARE
    r lead_create_request;
    o lead_create_outcome;
    stored idempotency_keys;
    code text;
    cons text;
    waits_end timestamptz := clock_timestamp() + make_interval(secs => p_lock_budget_ms / 1000.0);
    i int := 0;
    -- the events of the requests that created a lead, in order
    ev_ws uuid[] := '{}';
    ev_type text[] := '{}';
    ev_id uuid[] := '{}';
    ev_obj jsonb[] := '{}';
    obj jsonb;
    -- the lead's row as the request left it: its idempotency record and
    -- its event's object
    lead_obj jsonb;
BEGIN
    -- The events of these creates are written once, at the end, for the
    -- requests that created a lead: the triggers stand aside meanwhile.
    PERFORM set_config('partner.defer_events', 'on', true);
    FOREACH r IN ARRAY p_requests LOOP
        IF p_lock_budget_ms IS NOT NULL THEN
            PERFORM set_config('lock_timeout',
                greatest(1, least(500, floor(extract(epoch FROM waits_end - clock_timestamp()) * 1000)))::int || 'ms', true);
        END IF;
        stored := NULL;
        lead_obj := NULL;
        BEGIN
            IF r.key IS NOT NULL THEN
                stored := idempotency_claim(r.workspace_id, r.client_id, r.path, r.key, decode(r.request_hash, 'base64'),
                                            r.lock_key, r.fresh_since);
            END IF;
            IF stored.key IS NOT NULL THEN
                o := jsonb_populate_record(NULL::lead_create_outcome, stored.record);
            ELSE
                SELECT * INTO o FROM lead_create_set(r.workspace_id, ARRAY[r]);
                IF o.id IS NOT NULL THEN
                    lead_obj := to_jsonb(o) - '{idx,err_code,err_constraint,existing_id}'::text[];
                END IF;
                IF r.key IS NOT NULL AND o.id IS NOT NULL THEN
                    -- The record is the lead's row, as lead_create stored
                    -- it: a replay reads keys stored before this migration
                    -- too.
                    PERFORM idempotency_save(r.workspace_id, r.client_id, r.path, r.key, decode(r.request_hash, 'base64'),
                                             lead_obj, NULL);
                END IF;
            END IF;
        EXCEPTION WHEN unique_violation OR foreign_key_violation OR lock_not_available OR SQLSTATE 'PA409' OR SQLSTATE 'PA422' THEN
            GET STACKED DIAGNOSTICS code = RETURNED_SQLSTATE, cons = CONSTRAINT_NAME;
            o := NULL;
            o.err_code := code;
            o.err_constraint := nullif(cons, '');
        END;
        o.idx := i;
        i := i + 1;
        IF o.id IS NOT NULL AND stored.key IS NULL THEN
            -- What the triggers would have written for it: its contact's
            -- event when it inserted the contact (lead_create_set gives a
            -- contact it inserts the request's fresh contact_new_id), then
            -- its lead's, each with the row as the request left it (no
            -- later request of the statement changes either).
            IF r.contact_id IS NULL AND o.contact_id = r.contact_new_id THEN
                SELECT to_jsonb(c) INTO obj FROM contacts c WHERE c.workspace_id = r.workspace_id AND c.id = o.contact_id;
                ev_ws := ev_ws || r.workspace_id;
                ev_type := ev_type || 'contact.created'::text;
                ev_id := ev_id || o.contact_id;
                ev_obj := ev_obj || obj;
            END IF;
            ev_ws := ev_ws || r.workspace_id;
            ev_type := ev_type || 'lead.created'::text;
            ev_id := ev_id || o.id;
            ev_obj := ev_obj || lead_obj;
        END IF;
        RETURN NEXT o;
    END LOOP;
    PERFORM set_config('partner.defer_events', 'off', true);
    IF cardinality(ev_id) > 0 THEN
        INSERT INTO events (workspace_id, change_xid, type, record_id, object)
        SELECT e.ws, pg_current_xact_id()::text::bigint, e.type, e.id, e.obj
        FROM unnest(ev_ws, ev_type, ev_id, ev_obj) WITH ORDINALITY AS e (ws, type, id, obj, n)
        ORDER BY e.n;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION lead_create_requests(p_requests lead_create_request[], p_lock_budget_ms int)
RETURNS SETOF lead_create_outcome LANGUAGE plpgsql AS $$
DECLARE
    r lead_create_request;
    o lead_create_outcome;
    stored idempotency_keys;
    code text;
    cons text;
    waits_end timestamptz := clock_timestamp() + make_interval(secs => p_lock_budget_ms / 1000.0);
    i int := 0;
    -- the events of the requests that created a lead, in order
    ev_ws uuid[] := '{}';
    ev_type text[] := '{}';
    ev_id uuid[] := '{}';
    ev_obj jsonb[] := '{}';
    obj jsonb;
BEGIN
    -- The events of these creates are written once, at the end, for the
    -- requests that created a lead: the triggers stand aside meanwhile.
    PERFORM set_config('partner.defer_events', 'on', true);
    FOREACH r IN ARRAY p_requests LOOP
        IF p_lock_budget_ms IS NOT NULL THEN
            PERFORM set_config('lock_timeout',
                greatest(1, least(500, floor(extract(epoch FROM waits_end - clock_timestamp()) * 1000)))::int || 'ms', true);
        END IF;
        stored := NULL;
        BEGIN
            IF r.key IS NOT NULL THEN
                stored := idempotency_claim(r.workspace_id, r.client_id, r.path, r.key, decode(r.request_hash, 'base64'),
                                            r.lock_key, r.fresh_since);
            END IF;
            IF stored.key IS NOT NULL THEN
                o := jsonb_populate_record(NULL::lead_create_outcome, stored.record);
            ELSE
                SELECT * INTO o FROM lead_create_set(r.workspace_id, ARRAY[r]);
                IF r.key IS NOT NULL AND o.id IS NOT NULL THEN
                    -- The record is the lead's row, as lead_create stored
                    -- it: a replay reads keys stored before this migration
                    -- too.
                    PERFORM idempotency_save(r.workspace_id, r.client_id, r.path, r.key, decode(r.request_hash, 'base64'),
                                             to_jsonb(o) - '{idx,err_code,err_constraint,existing_id}'::text[], NULL);
                END IF;
            END IF;
        EXCEPTION WHEN unique_violation OR foreign_key_violation OR lock_not_available OR SQLSTATE 'PA409' OR SQLSTATE 'PA422' THEN
            GET STACKED DIAGNOSTICS code = RETURNED_SQLSTATE, cons = CONSTRAINT_NAME;
            o := NULL;
            o.err_code := code;
            o.err_constraint := nullif(cons, '');
        END;
        o.idx := i;
        i := i + 1;
        IF o.id IS NOT NULL AND stored.key IS NULL THEN
            -- What the triggers would have written for it: its contact's
            -- event when it inserted the contact (lead_create_set gives a
            -- contact it inserts the request's fresh contact_new_id), then
            -- its lead's, each with the row as the request left it (no
            -- later request of the statement changes either).
            IF r.contact_id IS NULL AND o.contact_id = r.contact_new_id THEN
                SELECT to_jsonb(c) INTO obj FROM contacts c WHERE c.workspace_id = r.workspace_id AND c.id = o.contact_id;
                ev_ws := ev_ws || r.workspace_id;
                ev_type := ev_type || 'contact.created'::text;
                ev_id := ev_id || o.contact_id;
                ev_obj := ev_obj || obj;
            END IF;
            ev_ws := ev_ws || r.workspace_id;
            ev_type := ev_type || 'lead.created'::text;
            ev_id := ev_id || o.id;
            ev_obj := ev_obj || (to_jsonb(o) - '{idx,err_code,err_constraint,existing_id}'::text[]);
        END IF;
        RETURN NEXT o;
    END LOOP;
    PERFORM set_config('partner.defer_events', 'off', true);
    IF cardinality(ev_id) > 0 THEN
        INSERT INTO events (workspace_id, change_xid, type, record_id, object)
        SELECT e.ws, pg_current_xact_id()::text::bigint, e.type, e.id, e.obj
        FROM unnest(ev_ws, ev_type, ev_id, ev_obj) WITH ORDINALITY AS e (ws, type, id, obj, n)
        ORDER BY e.n;
    END IF;
END
$$;
-- +goose StatementEnd

DROP TRIGGER contacts_events_insert ON contacts;
CREATE TRIGGER contacts_events_insert AFTER INSERT ON contacts
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    WHEN (current_setting('partner.defer_events', true) IS DISTINCT FROM 'on') EXECUTE FUNCTION partner_record_events('contact');
DROP TRIGGER contacts_events_update ON contacts;
CREATE TRIGGER contacts_events_update AFTER UPDATE ON contacts
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
    WHEN (current_setting('partner.defer_events', true) IS DISTINCT FROM 'on') EXECUTE FUNCTION partner_record_events('contact');
DROP TRIGGER contacts_events_delete ON contacts;
CREATE TRIGGER contacts_events_delete AFTER DELETE ON contacts
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
    WHEN (current_setting('partner.defer_events', true) IS DISTINCT FROM 'on') EXECUTE FUNCTION partner_record_events('contact');
DROP TRIGGER leads_events_insert ON leads;
CREATE TRIGGER leads_events_insert AFTER INSERT ON leads
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    WHEN (current_setting('partner.defer_events', true) IS DISTINCT FROM 'on') EXECUTE FUNCTION partner_record_events('lead');
DROP TRIGGER leads_events_update ON leads;
CREATE TRIGGER leads_events_update AFTER UPDATE ON leads
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
    WHEN (current_setting('partner.defer_events', true) IS DISTINCT FROM 'on') EXECUTE FUNCTION partner_record_events('lead');
DROP TRIGGER leads_events_delete ON leads;
CREATE TRIGGER leads_events_delete AFTER DELETE ON leads
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
    WHEN (current_setting('partner.defer_events', true) IS DISTINCT FROM 'on') EXECUTE FUNCTION partner_record_events('lead');

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION partner_record_events() RETURNS trigger LANGUAGE plpgsql AS $$
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
