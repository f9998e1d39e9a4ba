-- lead_create_item_set creates the leads p_items of one workspace, each with
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
--   4. one outcome per item, in input order (lead_create_item_outcome).
-- Each item so ends as it would alone, one after another: the same leads,
-- contacts, titles and refusals.
--
-- The events of its creates: it writes them itself, once, at the end (the
-- contacts it inserted that a created lead kept, then the leads, in the
-- order inserted, each with its row as the call left it: what the insert
-- triggers wrote, one per statement, before 00126 dropped the leads'),
-- unless its caller writes them (partner.defer_events on:
-- lead_create_item_requests writes a whole group's at once). Every lead is
-- inserted here: TestOnlyLeadCreateSetInsertsLeads.
--
-- Steps 1 and 2 have two shapes, the same rules: one item (every single
-- create) runs statements that touch one row each, as lead_create did; more
-- (a batch) run one set-based statement each, as the batch queries did. A
-- set-based statement costs more to start than one row costs to write, and
-- a hundred one-row statements cost twice one set-based statement: each
-- shape alone made one of the lead-ingest lines fall (docs/performance.md).
-- TestBothShapesAgree runs the same items through both.
CREATE OR REPLACE FUNCTION lead_create_item_set(p_workspace_id uuid, p_items lead_create_item[])
RETURNS SETOF lead_create_item_outcome LANGUAGE plpgsql AS $$
DECLARE
    n int := coalesce(cardinality(p_items), 0);
    it lead_create_item;
    ct contacts;
    ld leads;
    f lead_create_item;
    created leads[] := array_fill(NULL::leads, ARRAY[n]);   -- each item's lead
    err text[] := array_fill(NULL::text, ARRAY[n]);         -- why an item has none
    holder uuid[] := array_fill(NULL::uuid, ARRAY[n]);      -- the lead holding its external id
    made uuid[] := '{}'::uuid[];                            -- the contacts step 1 inserted
    done int := 0;
    first int;
    m uuid;
    h uuid;
    -- the caller writes the events (lead_create_requests), else this call
    deferred boolean := coalesce(current_setting('partner.defer_events', true) = 'on', false);
BEGIN
    IF NOT deferred THEN
        -- The contacts' insert trigger (and the update and delete
        -- triggers of step 3) stand aside: the events are written below.
        PERFORM set_config('partner.defer_events', 'on', true);
    END IF;
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
                                      custom_fields, created_at, updated_at)
                VALUES (p_workspace_id, it.contact_new_id, it.contact_email, it.contact_phone, it.contact_first_name,
                        it.contact_last_name, it.contact_company_name, it.contact_job_title, it.contact_custom_fields,
                        now(), now())
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
                               value_amount, value_currency, external_id, custom_fields, created_at, updated_at)
            VALUES (p_workspace_id, it.id, ct.id, coalesce(it.title, lead_default_title(ct.first_name, ct.last_name, ct.email, ct.phone)),
                    it.status, it.source, it.campaign, it.message, it.value_amount, it.value_currency, it.external_id,
                    it.custom_fields, now(), now())
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
                                  custom_fields, created_at, updated_at)
            SELECT DISTINCT ON (coalesce(x.contact_email, x.contact_new_id::text))
                   p_workspace_id, x.contact_new_id, x.contact_email, x.contact_phone, x.contact_first_name,
                   x.contact_last_name, x.contact_company_name, x.contact_job_title, x.contact_custom_fields, now(), now()
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
                               value_amount, value_currency, external_id, custom_fields, created_at, updated_at)
            SELECT p_workspace_id, x.id, c.id, coalesce(x.title, lead_default_title(c.first_name, c.last_name, c.email, c.phone)),
                   x.status, x.source, x.campaign, x.message, x.value_amount, x.value_currency, x.external_id,
                   x.custom_fields, now(), now()
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
            RETURNING leads AS l)
        SELECT array_agg(ins.l) INTO created FROM ins;
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
                company_name = f.contact_company_name, job_title = f.contact_job_title,
                custom_fields = f.contact_custom_fields
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

    IF NOT deferred THEN
        PERFORM set_config('partner.defer_events', 'off', true);
        IF done > 0 THEN
            INSERT INTO events (workspace_id, change_xid, type, record_id, object)
            SELECT p_workspace_id, pg_current_xact_id()::text::bigint, e.type, e.id, e.object
            FROM (SELECT 1 AS step, x.n AS n, NULL::text AS ext, 'contact.created'::text AS type, c.id, to_jsonb(c) AS object
                  FROM unnest(made) WITH ORDINALITY AS x (id, n)
                  JOIN contacts c ON c.workspace_id = p_workspace_id AND c.id = x.id
                  UNION ALL
                  SELECT 2, k, (p_items[k]).external_id, 'lead.created', (created[k]).id, to_jsonb(created[k])
                  FROM generate_subscripts(created, 1) AS k
                  WHERE (created[k]).id IS NOT NULL) e
            ORDER BY e.step, e.ext, e.n;
        END IF;
    END IF;

    FOR k IN 1 .. n LOOP
        ld := created[k];
        RETURN NEXT ROW(k - 1, err[k], CASE WHEN err[k] IS NOT NULL THEN 'leads_external_id' END, holder[k], (ld).*);
    END LOOP;
END
$$;
