-- contact_create_values inserts a contact, with its custom field values
-- (p_custom_fields, NULL for none), and returns it. With a key (p_key not
-- NULL) it first claims the key: a replay returns the stored row instead,
-- whose id is not p_id. A taken email or external id raises the unique
-- violation of its index.
CREATE OR REPLACE FUNCTION contact_create_values(
    p_workspace_id uuid, p_client_id uuid, p_path text, p_key text, p_request_hash bytea, p_lock_key bigint,
    p_fresh_since timestamptz,
    p_id uuid, p_email text, p_phone text, p_first_name text, p_last_name text, p_company_name text,
    p_job_title text, p_external_id text, p_custom_fields jsonb)
RETURNS SETOF contacts LANGUAGE plpgsql AS $$
DECLARE
    stored idempotency_keys;
    c contacts;
BEGIN
    IF p_key IS NOT NULL THEN
        stored := idempotency_claim(p_workspace_id, p_client_id, p_path, p_key, p_request_hash, p_lock_key, p_fresh_since);
        IF stored.key IS NOT NULL THEN
            RETURN QUERY SELECT * FROM jsonb_populate_record(NULL::contacts, stored.record);
            RETURN;
        END IF;
    END IF;
    INSERT INTO contacts (workspace_id, id, email, phone, first_name, last_name, company_name, job_title,
                          external_id, custom_fields, created_at, updated_at)
    VALUES (p_workspace_id, p_id, p_email, p_phone, p_first_name, p_last_name, p_company_name, p_job_title,
            p_external_id, p_custom_fields, now(), now())
    RETURNING * INTO c;
    IF p_key IS NOT NULL THEN
        PERFORM idempotency_save(p_workspace_id, p_client_id, p_path, p_key, p_request_hash, to_jsonb(c), NULL);
    END IF;
    RETURN NEXT c;
END
$$;
