-- +goose Up

-- One way to create leads (issue 21). Until now a lead was made three
-- ways: lead_create (one request, 00010), lead_create_group (several
-- requests sharing a commit, 00060 and 00073, its arguments parallel
-- arrays in which '', the nil UUID and -1 stood for NULL, and its answer
-- a table of casts in which they stood for NULL again) and the batch's
-- set-based queries (ContactCreateInline, LeadCreateMany,
-- LeadBatchFailures), each with its own find-or-create of the inline
-- contact. Now every create goes through lead_create_set, and single
-- creates (alone, or sharing a commit) through lead_create_requests
-- around it.

-- lead_create_request is one create as the server sends it (JSON, read
-- with jsonb_populate_recordset, so that NULL is null and needs no
-- stand-in; or as the row the LeadCreate query builds): its attributes are
-- the server's dbsqlc.LeadCreateParams field by field, in order
-- (TestRequestIsLeadCreateRequest). The key's fields are
-- NULL for an item of a batch (the batch's key is the server's) and for a
-- create without a key; request_hash is base64, as JSON carries bytes.
CREATE TYPE lead_create_request AS (
    workspace_id uuid, client_id uuid, path text, key text, request_hash text, lock_key bigint,
    fresh_since timestamptz, id uuid, contact_id uuid, contact_new_id uuid, contact_email text,
    contact_phone text, contact_first_name text, contact_last_name text, contact_company_name text,
    contact_job_title text, title text, status text, source text, campaign text, message text,
    value_amount bigint, value_currency text, external_id text);

-- lead_create_outcome is the answer for one item: its index (from 0) and
-- either the lead (the columns of leads, in their order), or why there is
-- none. It is a table only for its row type, and holds no rows: sqlc reads
-- the columns of a function's answer with their nullability only from a
-- table (a RETURNS TABLE column or a cast it reads as NOT NULL, which is
-- why lead_create_group answered stand-ins for NULL). Every column of
-- leads is here, nullable (TestOutcomeHasEveryLeadColumn):
--   id not NULL               the lead (created, or the stored answer of
--                             the request's key);
--   id and err_code NULL      contact_id names no contact of the workspace;
--   err_code 23505            the external id is taken: existing_id is the
--                             lead that holds it, or NULL when the holder
--                             let go of it meanwhile (run the create again);
--   any other err_code        the error that rolled back this request
--                             alone (lead_create_requests): its SQLSTATE
--                             and constraint.
CREATE TABLE lead_create_outcome (
    idx int NOT NULL, err_code text, err_constraint text, existing_id uuid,
    workspace_id uuid, id uuid, contact_id uuid, title text, status text, source text, campaign text,
    message text, value_amount bigint, value_currency text, external_id text,
    created_at timestamptz, updated_at timestamptz, change_xid bigint,
    CHECK (false));

-- lead_create_set creates the leads p_items of one workspace, each with
-- its contact: contact_id, else the contact with contact_email, else a new
-- contact made of the contact_ fields (with id contact_new_id). It is the
-- only find-or-create of a lead's contact, for one item (a single create)
-- or a hundred (a batch):
--   1. each item's contact, in email order, so that concurrent batches
--      take the unique index's locks in one order: found, or inserted with
--      the fields of the first item with the email; an email a concurrent
--      transaction inserts first is waited for and then found (ON CONFLICT
--      DO NOTHING, then a statement that sees it);
--   2. the leads, in external id order (then input order), titled
--      lead_default_title of their contact when they have no title; an
--      item whose contact_id names no contact is skipped, and so is one
--      whose external id is taken (by a lead or an earlier item);
--   3. only when an item was skipped: a new contact whose first item was
--      skipped takes the fields of its first created item, with the
--      default titles made from it, as that item alone would have made
--      it; a new contact no created lead uses is removed again;
--   4. one outcome per item, in input order (lead_create_outcome).
-- Each item so ends as it would alone, one after another: the same leads,
-- contacts, titles and refusals.
--
-- Steps 1 and 2 have two shapes, the same rules: one item (every single
-- create) runs statements that touch one row each, as lead_create did; more
-- (a batch) run one set-based statement each, as the batch queries did. A
-- set-based statement costs more to start than one row costs to write, and
-- a hundred one-row statements cost twice one set-based statement: each
-- shape alone made one of the lead-ingest lines fall (docs/performance.md).
-- TestBothShapesAgree runs the same items through both.
-- +goose StatementBegin
CREATE FUNCTION lead_create_set(p_workspace_id uuid, p_items lead_create_request[])
RETURNS SETOF lead_create_outcome LANGUAGE plpgsql AS $$
DECLARE
    n int := coalesce(cardinality(p_items), 0);
    it lead_create_request;
    ct contacts;
    ld leads;
    f lead_create_request;
    created leads[] := array_fill(NULL::leads, ARRAY[n]);   -- each item's lead
    err text[] := array_fill(NULL::text, ARRAY[n]);         -- why an item has none
    holder uuid[] := array_fill(NULL::uuid, ARRAY[n]);      -- the lead holding its external id
    made uuid[] := '{}';                                    -- the contacts step 1 inserted
    done int := 0;
    first int;
    m uuid;
    h uuid;
BEGIN
    IF n = 1 THEN
        it := p_items[1];
        IF it.contact_id IS NOT NULL THEN
            SELECT * INTO ct FROM contacts WHERE workspace_id = p_workspace_id AND id = it.contact_id;
        ELSE
            IF it.contact_email IS NOT NULL THEN
                SELECT * INTO ct FROM contacts WHERE workspace_id = p_workspace_id AND email = it.contact_email;
            END IF;
            IF ct.id IS NULL THEN
                INSERT INTO contacts (workspace_id, id, email, phone, first_name, last_name, company_name, job_title,
                                      created_at, updated_at)
                VALUES (p_workspace_id, it.contact_new_id, it.contact_email, it.contact_phone, it.contact_first_name,
                        it.contact_last_name, it.contact_company_name, it.contact_job_title, now(), now())
                ON CONFLICT DO NOTHING
                RETURNING * INTO ct;
                IF ct.id IS NULL THEN
                    SELECT * INTO ct FROM contacts WHERE workspace_id = p_workspace_id AND email = it.contact_email;
                ELSE
                    made := ARRAY[ct.id];
                END IF;
            END IF;
        END IF;
        IF ct.id IS NOT NULL THEN
            INSERT INTO leads (workspace_id, id, contact_id, title, status, source, campaign, message,
                               value_amount, value_currency, external_id, created_at, updated_at)
            VALUES (p_workspace_id, it.id, ct.id, coalesce(it.title, lead_default_title(ct.first_name, ct.last_name, ct.email, ct.phone)),
                    it.status, it.source, it.campaign, it.message, it.value_amount, it.value_currency, it.external_id, now(), now())
            ON CONFLICT (workspace_id, external_id) WHERE external_id IS NOT NULL DO NOTHING
            RETURNING * INTO ld;
            IF ld.id IS NOT NULL THEN
                created[1] := ld;
                done := 1;
            END IF;
        END IF;
    ELSIF n > 1 THEN
        -- A plan made for the items at hand would be made on every call
        -- (its estimate of the array's rows differs from the cached
        -- plan's), and the lookups below are written so that the generic
        -- plan is the right one for any count.
        PERFORM set_config('plan_cache_mode', 'force_generic_plan', true);
        WITH ins AS (
            INSERT INTO contacts (workspace_id, id, email, phone, first_name, last_name, company_name, job_title,
                                  created_at, updated_at)
            SELECT DISTINCT ON (coalesce(x.contact_email, x.contact_new_id::text))
                   p_workspace_id, x.contact_new_id, x.contact_email, x.contact_phone, x.contact_first_name,
                   x.contact_last_name, x.contact_company_name, x.contact_job_title, now(), now()
            FROM unnest(p_items) WITH ORDINALITY AS x
            WHERE x.contact_id IS NULL
              AND (x.contact_email IS NULL
                   OR (SELECT c.id FROM contacts c WHERE c.workspace_id = p_workspace_id AND c.email = x.contact_email
                       LIMIT 1) IS NULL)
            ORDER BY coalesce(x.contact_email, x.contact_new_id::text), x.ordinality
            ON CONFLICT DO NOTHING
            RETURNING id)
        SELECT coalesce(array_agg(id), '{}') INTO made FROM ins;

        WITH ins AS (
            INSERT INTO leads (workspace_id, id, contact_id, title, status, source, campaign, message,
                               value_amount, value_currency, external_id, created_at, updated_at)
            SELECT p_workspace_id, x.id, c.id, coalesce(x.title, lead_default_title(c.first_name, c.last_name, c.email, c.phone)),
                   x.status, x.source, x.campaign, x.message, x.value_amount, x.value_currency, x.external_id, now(), now()
            FROM unnest(p_items) WITH ORDINALITY AS x
            CROSS JOIN LATERAL (
                -- LIMIT keeps this a lookup by primary key per item, never
                -- a join over the workspace's contacts.
                SELECT c.id, c.first_name, c.last_name, c.email, c.phone FROM contacts c
                WHERE c.workspace_id = p_workspace_id
                  AND c.id = coalesce(x.contact_id,
                                      (SELECT e.id FROM contacts e WHERE e.workspace_id = p_workspace_id AND e.email = x.contact_email),
                                      x.contact_new_id)
                LIMIT 1
            ) c
            ORDER BY x.external_id, x.ordinality
            ON CONFLICT (workspace_id, external_id) WHERE external_id IS NOT NULL DO NOTHING
            RETURNING *)
        SELECT array_agg(ins) INTO created FROM ins;
        done := coalesce(cardinality(created), 0);
        -- created by input position
        created := ARRAY(SELECT l FROM unnest(p_items) WITH ORDINALITY AS x LEFT JOIN unnest(created) AS l ON l.id = x.id
                         ORDER BY x.ordinality);
    END IF;

    -- Why an item has no lead: its contact_id names no contact (no
    -- err_code); else its external id is taken, by holder if still held
    -- (else it let go meanwhile, or an inline contact was not found after
    -- all: run the create again).
    IF done < n THEN
        FOR k IN 1 .. n LOOP
            CONTINUE WHEN (created[k]).id IS NOT NULL;
            it := p_items[k];
            IF it.contact_id IS NULL OR EXISTS (SELECT 1 FROM contacts WHERE workspace_id = p_workspace_id AND id = it.contact_id) THEN
                err[k] := '23505';
                IF it.external_id IS NOT NULL THEN
                    SELECT id INTO h FROM leads WHERE workspace_id = p_workspace_id AND external_id = it.external_id;
                    holder[k] := h;
                END IF;
            END IF;
        END LOOP;
    END IF;

    IF done < n AND cardinality(made) > 0 THEN
        FOREACH m IN ARRAY made LOOP
            first := NULL;
            FOR k IN 1 .. n LOOP
                IF (created[k]).contact_id = m THEN
                    first := k;
                    EXIT;
                END IF;
            END LOOP;
            IF first IS NULL THEN
                DELETE FROM contacts WHERE workspace_id = p_workspace_id AND id = m;
                CONTINUE;
            END IF;
            f := p_items[first];
            CONTINUE WHEN f.contact_new_id = m; -- made from its first created item
            UPDATE contacts
            SET phone = f.contact_phone, first_name = f.contact_first_name, last_name = f.contact_last_name,
                company_name = f.contact_company_name, job_title = f.contact_job_title
            WHERE workspace_id = p_workspace_id AND id = m
            RETURNING * INTO ct;
            FOR k IN 1 .. n LOOP
                IF (created[k]).contact_id = m AND (p_items[k]).title IS NULL THEN
                    UPDATE leads SET title = lead_default_title(ct.first_name, ct.last_name, ct.email, ct.phone)
                    WHERE workspace_id = p_workspace_id AND id = (created[k]).id
                    RETURNING * INTO ld;
                    created[k] := ld;
                END IF;
            END LOOP;
        END LOOP;
    END IF;

    FOR k IN 1 .. n LOOP
        ld := created[k];
        RETURN NEXT ROW(k - 1, err[k], CASE WHEN err[k] IS NOT NULL THEN 'leads_external_id' END, holder[k], (ld).*);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- lead_create_requests runs single creates (a lead_create_request each,
-- with its own workspace and key) in the statement's one transaction, so
-- that concurrent ones share one commit (service/lead/writer.go), or one
-- alone. Each runs in its own subtransaction (an exception block): the key
-- is claimed (a replay answers the stored lead), lead_create_set makes the
-- lead, and its answer is stored under the key. An idempotency refusal or
-- a lock wait longer than allowed rolls back that request alone and
-- answers its SQLSTATE (lead_create_outcome); any other error aborts the
-- statement, and the server runs each request of a group on its own.
--
-- With p_lock_budget_ms (a group), one request must not hold up the
-- others for long: a lock it waits for (a contact's email being inserted
-- by a transaction that stays open) would keep the whole group, and every
-- create queued behind it, waiting. So each wait is at most half a second
-- (lock_timeout) and all the waits together share p_lock_budget_ms; once
-- it is spent, a request still runs but any wait fails at once (55P03),
-- and the server runs that one alone, under its own deadline and its
-- tenant's share of the pool (00073). Without it (NULL: one request alone)
-- the role's lock_timeout holds (00070).
-- +goose StatementBegin
CREATE FUNCTION lead_create_requests(p_requests lead_create_request[], p_lock_budget_ms int)
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
        EXCEPTION WHEN unique_violation OR lock_not_available OR SQLSTATE 'PA409' OR SQLSTATE 'PA422' THEN
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

-- lead_create (00010) is gone: a single create is lead_create_requests
-- with one request (the LeadCreate query).
DROP FUNCTION lead_create(uuid, uuid, text, text, bytea, bigint, timestamptz, uuid, uuid, uuid, text, text, text,
                          text, text, text, text, text, text, text, text, bigint, text, text);
DROP FUNCTION lead_create_group(uuid[], uuid[], text, text[], bytea[], bigint[], timestamptz[], uuid[], uuid[], uuid[],
                               text[], text[], text[], text[], text[], text[], text[], text[], text[], text[], text[],
                               bigint[], text[], text[], int);

-- +goose Down
-- +goose StatementBegin
CREATE FUNCTION lead_create_group(
    p_workspace_ids uuid[], p_client_ids uuid[], p_path text, p_keys text[], p_request_hashes bytea[],
    p_lock_keys bigint[], p_fresh_since timestamptz[],
    p_ids uuid[], p_contact_ids uuid[],
    p_contact_new_ids uuid[], p_contact_emails text[], p_contact_phones text[], p_contact_first_names text[],
    p_contact_last_names text[], p_contact_company_names text[], p_contact_job_titles text[],
    p_titles text[], p_statuses text[], p_sources text[], p_campaigns text[], p_messages text[],
    p_value_amounts bigint[], p_value_currencies text[], p_external_ids text[], p_lock_budget_ms int)
RETURNS TABLE (idx int, err_code text, err_constraint text,
               workspace_id uuid, id uuid, contact_id uuid, title text, status text, source text,
               campaign text, message text, value_amount bigint, value_currency text, external_id text,
               created_at timestamptz, updated_at timestamptz, change_xid bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    l leads;
    waits_end timestamptz := clock_timestamp() + make_interval(secs => p_lock_budget_ms / 1000.0);
    wait_ms int;
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_ids, 1), 0) LOOP
        l := NULL;
        err_code := NULL;
        err_constraint := NULL;
        -- Once the waits have spent the budget, an item still runs, but
        -- any wait fails at once: items that take no contended lock go on
        -- in the group, and one that would wait is run alone.
        wait_ms := greatest(1, least(500, floor(extract(epoch FROM waits_end - clock_timestamp()) * 1000)))::int;
        PERFORM set_config('lock_timeout', wait_ms || 'ms', true);
        BEGIN
            SELECT * INTO l FROM lead_create(
                p_workspace_ids[i], p_client_ids[i], p_path, nullif(p_keys[i], ''),
                CASE WHEN p_keys[i] <> '' THEN p_request_hashes[i] END,
                CASE WHEN p_keys[i] <> '' THEN p_lock_keys[i] END,
                CASE WHEN p_keys[i] <> '' THEN p_fresh_since[i] END,
                p_ids[i], nullif(p_contact_ids[i], '00000000-0000-0000-0000-000000000000'),
                p_contact_new_ids[i], nullif(p_contact_emails[i], ''), nullif(p_contact_phones[i], ''),
                nullif(p_contact_first_names[i], ''), nullif(p_contact_last_names[i], ''),
                nullif(p_contact_company_names[i], ''), nullif(p_contact_job_titles[i], ''),
                nullif(p_titles[i], ''), p_statuses[i], nullif(p_sources[i], ''), nullif(p_campaigns[i], ''),
                nullif(p_messages[i], ''), nullif(p_value_amounts[i], -1), nullif(p_value_currencies[i], ''),
                nullif(p_external_ids[i], ''));
        EXCEPTION WHEN unique_violation OR lock_not_available OR SQLSTATE 'PA409' OR SQLSTATE 'PA422' THEN
            GET STACKED DIAGNOSTICS err_code = RETURNED_SQLSTATE, err_constraint = CONSTRAINT_NAME;
            l := NULL;
        END;
        -- No output is NULL (sqlc reads every column of the query as NOT
        -- NULL): '', the nil UUID, -1, 0 and the epoch stand for it, and
        -- no lead has any of them where its column is NOT NULL.
        idx := i - 1;
        err_code := coalesce(err_code, '');
        err_constraint := coalesce(err_constraint, '');
        workspace_id := coalesce(l.workspace_id, '00000000-0000-0000-0000-000000000000');
        id := coalesce(l.id, '00000000-0000-0000-0000-000000000000');
        contact_id := coalesce(l.contact_id, '00000000-0000-0000-0000-000000000000');
        title := coalesce(l.title, ''); status := coalesce(l.status, ''); source := coalesce(l.source, '');
        campaign := coalesce(l.campaign, ''); message := coalesce(l.message, '');
        value_amount := coalesce(l.value_amount, -1); value_currency := coalesce(l.value_currency, '');
        external_id := coalesce(l.external_id, '');
        created_at := coalesce(l.created_at, 'epoch'); updated_at := coalesce(l.updated_at, 'epoch');
        change_xid := coalesce(l.change_xid, 0);
        RETURN NEXT;
    END LOOP;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION lead_create(
    p_workspace_id uuid, p_client_id uuid, p_path text, p_key text, p_request_hash bytea, p_lock_key bigint,
    p_fresh_since timestamptz,
    p_id uuid, p_contact_id uuid,
    p_contact_new_id uuid, p_contact_email text, p_contact_phone text, p_contact_first_name text,
    p_contact_last_name text, p_contact_company_name text, p_contact_job_title text,
    p_title text, p_status text, p_source text, p_campaign text, p_message text,
    p_value_amount bigint, p_value_currency text, p_external_id text)
RETURNS SETOF leads LANGUAGE plpgsql AS $$
DECLARE
    stored idempotency_keys;
    c contacts;
    l leads;
BEGIN
    IF p_key IS NOT NULL THEN
        stored := idempotency_claim(p_workspace_id, p_client_id, p_path, p_key, p_request_hash, p_lock_key, p_fresh_since);
        IF stored.key IS NOT NULL THEN
            RETURN QUERY SELECT * FROM jsonb_populate_record(NULL::leads, stored.record);
            RETURN;
        END IF;
    END IF;
    IF p_contact_id IS NOT NULL THEN
        SELECT * INTO c FROM contacts WHERE workspace_id = p_workspace_id AND id = p_contact_id;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    ELSE
        IF p_contact_email IS NOT NULL THEN
            SELECT * INTO c FROM contacts WHERE workspace_id = p_workspace_id AND email = p_contact_email;
        END IF;
        IF c.id IS NULL THEN
            INSERT INTO contacts (workspace_id, id, email, phone, first_name, last_name, company_name, job_title,
                                  created_at, updated_at)
            VALUES (p_workspace_id, p_contact_new_id, p_contact_email, p_contact_phone, p_contact_first_name,
                    p_contact_last_name, p_contact_company_name, p_contact_job_title, now(), now())
            RETURNING * INTO c;
        END IF;
    END IF;
    INSERT INTO leads (workspace_id, id, contact_id, title, status, source, campaign, message,
                       value_amount, value_currency, external_id, created_at, updated_at)
    VALUES (p_workspace_id, p_id, c.id,
            coalesce(p_title, lead_default_title(c.first_name, c.last_name, c.email, c.phone)),
            p_status, p_source, p_campaign, p_message, p_value_amount, p_value_currency, p_external_id, now(), now())
    RETURNING * INTO l;
    IF p_key IS NOT NULL THEN
        PERFORM idempotency_save(p_workspace_id, p_client_id, p_path, p_key, p_request_hash, to_jsonb(l), NULL);
    END IF;
    RETURN NEXT l;
END
$$;
-- +goose StatementEnd

DROP FUNCTION lead_create_requests;
DROP FUNCTION lead_create_set;
DROP TABLE lead_create_outcome;
DROP TYPE lead_create_request;
