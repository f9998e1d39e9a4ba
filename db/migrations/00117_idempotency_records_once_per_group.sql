-- +goose Up

-- The lead-ingest line of issue 22, a third time (the feed may cost a
-- lead create at most a tenth of its rate), counted in instructions with
-- callgrind on the statement of a group of eight keyed creates, as for
-- 00116 (docs/performance.md, "(i)"): 7.05 M a statement after 00116,
-- 6.26 M at a1529b5.
--
-- * A keyed create saved its idempotency record with an INSERT of its own,
--   one per create in a group: PostgreSQL set the INSERT up every time
--   (its plan's nodes, the table's indexes and its CHECK read again from
--   their stored text). idempotency_keep now saves the records of every
--   create of the statement with one INSERT, at the end, as the events
--   are written (00113): 0.37 M less a statement. The records are the
--   same, in the same transaction, and a later request of the statement
--   with a key already used finds its record as before: the records
--   waiting are saved first (TestGroupAnswersAsEachCreateAlone has two
--   such requests, one replayed, one refused).
-- * The CHECK on events.type goes. Only partner_record_events and
--   lead_create_requests write events, each type a constant of theirs
--   (TestEveryCommittedWriteHasItsEvent holds every write path's events to
--   the type of its write), and PostgreSQL read the CHECK again from its
--   stored text for every statement that wrote events: 60,000
--   instructions a group.
-- * partner_record_events does nothing before its test of
--   partner.defer_events, its one work in a group's creates.
--
-- The statement: 6.64 M, 5.4 % above a1529b5's (6.30 M measured beside it;
-- 12.6 % after 00116).

-- +goose StatementBegin
-- idempotency_keep is idempotency_save for the records of many keyed
-- creates at once (no two with the same key), one INSERT for all.
CREATE FUNCTION idempotency_keep(p_workspace_ids uuid[], p_client_ids uuid[], p_paths text[], p_keys text[],
                                 p_request_hashes bytea[], p_records jsonb[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    -- plpgsql, not sql: the INSERT's plan is kept for the session, where
    -- a sql function would plan it on every call.
    INSERT INTO idempotency_keys (workspace_id, client_id, path, key, request_hash, record)
    SELECT * FROM unnest(p_workspace_ids, p_client_ids, p_paths, p_keys, p_request_hashes, p_records)
    ON CONFLICT (workspace_id, client_id, path, key) DO UPDATE
    SET request_hash = EXCLUDED.request_hash, record = EXCLUDED.record, response = NULL, created_at = now();
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
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

ALTER TABLE events DROP CONSTRAINT events_type_check;

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
    -- the idempotency records of the keyed requests that created a lead,
    -- in order, saved together by one INSERT (keep), at the end or before
    -- a later request of the statement with one of their keys
    sv_ws uuid[] := '{}';
    sv_client uuid[] := '{}';
    sv_path text[] := '{}';
    sv_key text[] := '{}';
    sv_hash bytea[] := '{}';
    sv_rec jsonb[] := '{}';
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
                o := jsonb_populate_record(NULL::lead_create_outcome, stored.record);
            ELSE
                SELECT * INTO o FROM lead_create_set(r.workspace_id, ARRAY[r]);
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

ALTER TABLE events ADD CONSTRAINT events_type_check
    CHECK (type IN ('contact.created', 'contact.updated', 'contact.deleted',
                    'lead.created', 'lead.updated', 'lead.deleted'));

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

DROP FUNCTION idempotency_keep(uuid[], uuid[], text[], text[], bytea[], jsonb[]);
