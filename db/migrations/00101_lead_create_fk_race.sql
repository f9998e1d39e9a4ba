-- +goose Up

-- lead_create_requests catches foreign_key_violation too, as the outcome
-- of the one request that met it. Deletes (00100) can now remove a
-- contact between lead_create_set finding it and its lead's foreign-key
-- check, which then fails: caught per request, it rolls back that request
-- alone (the service runs it again and finds no contact), not the group
-- of other requests, other tenants' included, that share its transaction.
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
