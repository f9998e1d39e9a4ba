-- kept for release 1.1.0: only the previous release calls it; drop it once PREVIOUS_RELEASE moves past 1.1.0.
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
