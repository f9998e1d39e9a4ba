-- +goose Up

-- lead_create_group's lock waits, all together, are bounded by
-- p_lock_budget_ms, which the server now sets to 50 ms (was half the
-- statement timeout): one lead group serves every tenant, so a tenant whose
-- creates wait for locks (its own batch holding the contacts' emails) kept
-- each group, and every other tenant's creates queued behind it, waiting up
-- to a second (TestOneTenantsLockWaitingLeadCreatesDoNotSlowAnothersLeadCreates).
-- Once the budget is spent, the items after it no longer fail unseen
-- (00060 refused them all with 55P03): they run with a 1 ms lock_timeout,
-- so those that wait for nothing go on in the group, and one that would
-- wait is run alone by its own caller, under its own budget and its
-- tenant's share of the pool.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION lead_create_group(
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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION lead_create_group(
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
        wait_ms := least(500, floor(extract(epoch FROM waits_end - clock_timestamp()) * 1000))::int;
        IF wait_ms < 1 THEN
            err_code := '55P03';
        ELSE
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
        END IF;
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
