-- +goose Up

-- Only release 1.1.0 called these; the previous release is 1.2.0 now,
-- which calls lead_create_item_set, lead_create_item_requests,
-- webhook_claim_sealed and its own contact create. Their types
-- (lead_create_outcome, webhook_claimed) stay: a 1.2.0 replica that starts
-- again (a restart, a rollback) applies its function files, these among
-- them, and a function's result type must exist to create it. IF EXISTS:
-- on a new database only 00168's contact_create exists when this runs; the
-- function files, applied after the migrations, made the others.
DROP FUNCTION IF EXISTS contact_create(uuid, uuid, text, text, bytea, bigint, timestamptz, uuid, text, text, text, text, text, text, text);
DROP FUNCTION IF EXISTS lead_create_set(uuid, lead_create_request[]);
DROP FUNCTION IF EXISTS lead_create_requests(lead_create_request[], int);
DROP FUNCTION IF EXISTS webhook_claim_due(int, int, int, text[], text[], int, int, uuid[], int[]);
DELETE FROM schema_functions WHERE name IN ('contact_create', 'lead_create_set', 'lead_create_requests', 'webhook_claim_due');

-- +goose Down
-- The functions 1.1.0 called, as they were (their bodies call function
-- files, absent when only the migrations ran).
SET LOCAL check_function_bodies = off;
-- +goose StatementBegin
-- contact_create inserts a contact and returns it. With a key (p_key not
-- NULL) it first claims the key: a replay returns the stored row instead,
-- whose id is not p_id. A taken email or external id raises the unique
-- violation of its index. It answers the columns by name (migration 00168),
-- so that a create under way while the table gains a column still answers.
CREATE OR REPLACE FUNCTION contact_create(
    p_workspace_id uuid, p_client_id uuid, p_path text, p_key text, p_request_hash bytea, p_lock_key bigint,
    p_fresh_since timestamptz,
    p_id uuid, p_email text, p_phone text, p_first_name text, p_last_name text, p_company_name text,
    p_job_title text, p_external_id text)
RETURNS TABLE (workspace_id uuid, id uuid, email text, phone text, first_name text, last_name text,
               company_name text, job_title text, external_id text, created_at timestamptz,
               updated_at timestamptz, change_xid bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    stored idempotency_keys;
    c contacts;
BEGIN
    IF p_key IS NOT NULL THEN
        stored := idempotency_claim(p_workspace_id, p_client_id, p_path, p_key, p_request_hash, p_lock_key, p_fresh_since);
        IF stored.key IS NOT NULL THEN
            c := jsonb_populate_record(NULL::contacts, stored.record);
            RETURN QUERY SELECT c.workspace_id, c.id, c.email, c.phone, c.first_name, c.last_name, c.company_name,
                                c.job_title, c.external_id, c.created_at, c.updated_at, c.change_xid;
            RETURN;
        END IF;
    END IF;
    INSERT INTO contacts (workspace_id, id, email, phone, first_name, last_name, company_name, job_title,
                          external_id, created_at, updated_at)
    VALUES (p_workspace_id, p_id, p_email, p_phone, p_first_name, p_last_name, p_company_name, p_job_title,
            p_external_id, now(), now())
    RETURNING * INTO c;
    IF p_key IS NOT NULL THEN
        PERFORM idempotency_save(p_workspace_id, p_client_id, p_path, p_key, p_request_hash, to_jsonb(c), NULL);
    END IF;
    RETURN QUERY SELECT c.workspace_id, c.id, c.email, c.phone, c.first_name, c.last_name, c.company_name,
                        c.job_title, c.external_id, c.created_at, c.updated_at, c.change_xid;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
-- lead_create_set is lead_create_item_set for items without custom field
-- values, as release 1.1.0 sends them, answered as 1.1.0 reads them
-- (lead_create_outcome, which has no custom_fields).
CREATE OR REPLACE FUNCTION lead_create_set(p_workspace_id uuid, p_items lead_create_request[])
RETURNS SETOF lead_create_outcome LANGUAGE sql AS $$
    SELECT idx, err_code, err_constraint, existing_id, workspace_id, id, contact_id, title, status, source, campaign, message, value_amount, value_currency, external_id, created_at, updated_at, change_xid
    FROM lead_create_item_set(p_workspace_id,
        ARRAY(SELECT jsonb_populate_record(NULL::lead_create_item, to_jsonb(r)) FROM unnest(p_items) WITH ORDINALITY AS r
              ORDER BY ordinality));
$$;
-- +goose StatementEnd
-- +goose StatementBegin
-- lead_create_requests is lead_create_item_requests for requests without
-- custom field values, as release 1.1.0 sends them, answered as 1.1.0
-- reads them (lead_create_outcome, which has no custom_fields).
CREATE OR REPLACE FUNCTION lead_create_requests(p_requests lead_create_request[], p_lock_budget_ms int)
RETURNS SETOF lead_create_outcome LANGUAGE sql AS $$
    SELECT idx, err_code, err_constraint, existing_id, workspace_id, id, contact_id, title, status, source, campaign, message, value_amount, value_currency, external_id, created_at, updated_at, change_xid
    FROM lead_create_item_requests(
        ARRAY(SELECT jsonb_populate_record(NULL::lead_create_item, to_jsonb(r)) FROM unnest(p_requests) WITH ORDINALITY AS r ORDER BY ordinality), p_lock_budget_ms);
$$;
-- +goose StatementEnd
-- +goose StatementBegin
-- webhook_claim_due is 1.1.0's claim: webhook_claim_sealed without the
-- sealed secrets, and without the endpoints whose plaintext secrets are
-- gone (a 1.1.0 replica cannot sign for them; a 1.2.0 replica does).
CREATE OR REPLACE FUNCTION webhook_claim_due(p_lease_ms int, p_per_endpoint int, p_max int, p_types text[], p_scopes text[],
                                             p_pool int, p_min_share int, p_busy_ws uuid[], p_busy_n int[])
RETURNS SETOF webhook_claimed LANGUAGE sql AS $$
    SELECT c.workspace_id, c.endpoint_id, c.event_xid, c.event_seq, c.event_id, c.event_type, c.record_id, c.attempts,
           c.lease_until, c.url, c.secret, c.previous_secret, c.previous_expires_at, c.object, c.changed, c.created_at
    FROM webhook_claim_sealed(p_lease_ms, p_per_endpoint, p_max, p_types, p_scopes, p_pool, p_min_share, p_busy_ws, p_busy_n, true) AS c;
$$;
-- +goose StatementEnd
