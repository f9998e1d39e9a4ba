CREATE OR REPLACE FUNCTION lead_create_item_requests(p_requests lead_create_item[], p_lock_budget_ms int)
RETURNS SETOF lead_create_item_outcome LANGUAGE plpgsql AS $$
DECLARE
    r lead_create_item;
    o lead_create_item_outcome;
    stored idempotency_keys;
    code text;
    cons text;
    waits_end timestamptz := clock_timestamp() + make_interval(secs => p_lock_budget_ms / 1000.0);
    i int := 0;
    -- the events of the requests that created a lead, in order
    ev_ws uuid[] := '{}'::uuid[];
    ev_type text[] := '{}'::text[];
    ev_id uuid[] := '{}'::uuid[];
    ev_obj jsonb[] := '{}'::jsonb[];
    obj jsonb;
    -- the lead's row as the request left it: its idempotency record and
    -- its event's object
    lead_obj jsonb;
    -- the idempotency records of the keyed requests that created a lead,
    -- in order, saved together by one INSERT (keep), at the end or before
    -- a later request of the statement with one of their keys
    sv_ws uuid[] := '{}'::uuid[];
    sv_client uuid[] := '{}'::uuid[];
    sv_path text[] := '{}'::text[];
    sv_key text[] := '{}'::text[];
    sv_hash bytea[] := '{}'::bytea[];
    sv_rec jsonb[] := '{}'::jsonb[];
BEGIN
    -- The events of these creates are written once, at the end, for the
    -- requests that created a lead: the triggers stand aside meanwhile.
    PERFORM set_config('partner.defer_events', 'on', true);
    FOREACH r IN ARRAY p_requests LOOP
        IF p_lock_budget_ms IS NOT NULL THEN
            PERFORM set_config('lock_timeout',
                greatest(1, least(500, floor(extract(epoch FROM waits_end - clock_timestamp()) * 1000)))::int || 'ms', true);
        END IF;
        IF r.key = ANY (sv_key) THEN
            -- A key this statement has just used: its claim reads the
            -- record saved for it, as it would after a create alone.
            PERFORM idempotency_keep(sv_ws, sv_client, sv_path, sv_key, sv_hash, sv_rec);
            sv_ws := '{}'; sv_client := '{}'; sv_path := '{}'; sv_key := '{}'; sv_hash := '{}'; sv_rec := '{}';
        END IF;
        stored := NULL;
        lead_obj := NULL;
        BEGIN
            IF r.key IS NOT NULL THEN
                stored := idempotency_claim(r.workspace_id, r.client_id, r.path, r.key, decode(r.request_hash, 'base64'),
                                            r.lock_key, r.fresh_since);
            END IF;
            IF stored.key IS NOT NULL THEN
                o := jsonb_populate_record(NULL::lead_create_item_outcome, stored.record);
            ELSE
                SELECT * INTO o FROM lead_create_item_set(r.workspace_id, ARRAY[r]);
                IF o.id IS NOT NULL THEN
                    lead_obj := to_jsonb(o) - '{idx,err_code,err_constraint,existing_id}'::text[];
                    IF r.key IS NOT NULL THEN
                        -- The record is the lead's row, as lead_create
                        -- stored it: a replay reads keys stored before this
                        -- migration too. The last thing of the request's
                        -- block: nothing after it can roll the create back.
                        sv_ws := sv_ws || r.workspace_id;
                        sv_client := sv_client || r.client_id;
                        sv_path := sv_path || r.path;
                        sv_key := sv_key || r.key;
                        sv_hash := sv_hash || decode(r.request_hash, 'base64');
                        sv_rec := sv_rec || lead_obj;
                    END IF;
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
            -- event when it inserted the contact (lead_create_item_set gives a
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
    IF cardinality(sv_key) > 0 THEN
        PERFORM idempotency_keep(sv_ws, sv_client, sv_path, sv_key, sv_hash, sv_rec);
    END IF;
    IF cardinality(ev_id) > 0 THEN
        INSERT INTO events (workspace_id, change_xid, type, record_id, object)
        SELECT e.ws, pg_current_xact_id()::text::bigint, e.type, e.id, e.obj
        FROM unnest(ev_ws, ev_type, ev_id, ev_obj) WITH ORDINALITY AS e (ws, type, id, obj, n)
        ORDER BY e.n;
    END IF;
END
$$;
