-- +goose Up

-- A lead's single creates write their events once per statement, not once
-- per request (issue 22, the lead-ingest line: the statement triggers of
-- 00100 fired for each request's contact and lead, two trigger runs and two
-- one-row inserts into events per lead, about 190 µs of PostgreSQL's time a
-- lead in a group of 32, against some 40 % of the whole create).
--
-- lead_create_requests sets partner.defer_events for its own statement: the
-- triggers on contacts and leads do not fire (their WHEN), and at the end it
-- writes, in one insert, the events the triggers would have written for the
-- requests that created a lead. That is safe because while it is set only
-- lead_create_set writes contacts and leads, and it only inserts (and then
-- updates or removes what it inserted): every change is a create, whose
-- net effect is the row as the statement leaves it. A request rolled back
-- alone takes its rows with it, and so has no event; a replay creates
-- nothing. The setting is transaction-local and set back before the
-- function returns, so every other statement, in this transaction or any
-- other, writes its events through the triggers as before.
-- TestGroupEventsAreTheTriggers compares both ways on the same creates.
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
BEGIN
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
        RETURN NEXT o;
    END LOOP;
END
$$;
-- +goose StatementEnd

DROP TRIGGER contacts_events_insert ON contacts;
CREATE TRIGGER contacts_events_insert AFTER INSERT ON contacts
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION partner_record_events('contact');
DROP TRIGGER contacts_events_update ON contacts;
CREATE TRIGGER contacts_events_update AFTER UPDATE ON contacts
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION partner_record_events('contact');
DROP TRIGGER contacts_events_delete ON contacts;
CREATE TRIGGER contacts_events_delete AFTER DELETE ON contacts
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION partner_record_events('contact');
DROP TRIGGER leads_events_insert ON leads;
CREATE TRIGGER leads_events_insert AFTER INSERT ON leads
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION partner_record_events('lead');
DROP TRIGGER leads_events_update ON leads;
CREATE TRIGGER leads_events_update AFTER UPDATE ON leads
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION partner_record_events('lead');
DROP TRIGGER leads_events_delete ON leads;
CREATE TRIGGER leads_events_delete AFTER DELETE ON leads
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION partner_record_events('lead');
