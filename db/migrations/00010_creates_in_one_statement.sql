-- +goose Up

-- Each create (a contact; a lead with its contact; the response stored
-- under an Idempotency-Key) is one statement: one of the functions below,
-- called by one sqlc query, so a create costs one round trip and runs in
-- the statement's own transaction. Inside a VOLATILE PL/pgSQL function
-- every statement takes a fresh snapshot (READ COMMITTED), so the key's
-- lookup sees whatever committed before its lock was granted, as separate
-- statements in a transaction would.

-- The stored answer of a single create is the row it created, as it was
-- then (record; jsonb_populate_record turns it back into a row), so a
-- replay renders the first body even after the record has changed. The
-- answer of a batch, which SQL does not build, stays the protobuf encoding
-- of the response (response). Rows from before this migration held the
-- protobuf of single creates, which SQL cannot read; a day's keys are
-- forgotten once, at the upgrade.
DELETE FROM idempotency_keys;
ALTER TABLE idempotency_keys ALTER COLUMN response DROP NOT NULL;
ALTER TABLE idempotency_keys ADD COLUMN record jsonb;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_answer CHECK (num_nonnulls(record, response) = 1);

-- The hourly sweep is the only reader of created_at. Rows arrive in
-- created_at order, so a BRIN index serves it at a fraction of a B-tree's
-- cost on every insert.
DROP INDEX idempotency_keys_created;
CREATE INDEX idempotency_keys_created ON idempotency_keys USING brin (created_at);

-- idempotency_claim marks a key in flight and returns the stored row of an
-- earlier request with the same key and body, or NULL when there is none
-- (created before p_fresh_since counts as none). A request still in
-- flight with the key raises SQLSTATE PA409 without waiting; the same key
-- with another body raises PA422. The transaction-scoped advisory lock
-- lasts until the caller's transaction ends.
-- +goose StatementBegin
CREATE FUNCTION idempotency_claim(p_workspace_id uuid, p_client_id uuid, p_path text, p_key text,
                                  p_request_hash bytea, p_lock_key bigint, p_fresh_since timestamptz)
RETURNS idempotency_keys LANGUAGE plpgsql AS $$
DECLARE
    k idempotency_keys;
BEGIN
    IF NOT pg_try_advisory_xact_lock(p_lock_key) THEN
        RAISE EXCEPTION 'a request with this Idempotency-Key is in flight' USING ERRCODE = 'PA409';
    END IF;
    SELECT * INTO k FROM idempotency_keys
    WHERE workspace_id = p_workspace_id AND client_id = p_client_id AND path = p_path AND key = p_key
      AND created_at >= p_fresh_since;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF k.request_hash <> p_request_hash THEN
        RAISE EXCEPTION 'the Idempotency-Key was used with another request' USING ERRCODE = 'PA422';
    END IF;
    RETURN k;
END
$$;
-- +goose StatementEnd

-- idempotency_save stores the answer of a successful create under its key,
-- as a row (p_record) or as protobuf (p_response); an expired row under the
-- same key is replaced.
-- +goose StatementBegin
CREATE FUNCTION idempotency_save(p_workspace_id uuid, p_client_id uuid, p_path text, p_key text,
                                 p_request_hash bytea, p_record jsonb, p_response bytea)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO idempotency_keys (workspace_id, client_id, path, key, request_hash, record, response)
    VALUES (p_workspace_id, p_client_id, p_path, p_key, p_request_hash, p_record, p_response)
    ON CONFLICT (workspace_id, client_id, path, key) DO UPDATE
    SET request_hash = EXCLUDED.request_hash, record = EXCLUDED.record, response = EXCLUDED.response,
        created_at = now();
$$;
-- +goose StatementEnd

-- lead_default_title is the title of a lead sent without one: its
-- contact's "First Last", else its email or phone. It is STABLE, as
-- concat_ws is, so that the planner inlines it into the statements that
-- use it instead of running the SQL-function executor for every row.
-- +goose StatementBegin
CREATE FUNCTION lead_default_title(first_name text, last_name text, email text, phone text)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT coalesce(nullif(concat_ws(' ', first_name, last_name), ''), email, phone, 'Lead')
$$;
-- +goose StatementEnd

-- contact_create inserts a contact and returns it. With a key (p_key not
-- NULL) it first claims the key: a replay returns the stored row instead,
-- whose id is not p_id. A taken email or external id raises the unique
-- violation of its index.
-- +goose StatementBegin
CREATE FUNCTION contact_create(
    p_workspace_id uuid, p_client_id uuid, p_path text, p_key text, p_request_hash bytea, p_lock_key bigint,
    p_fresh_since timestamptz,
    p_id uuid, p_email text, p_phone text, p_first_name text, p_last_name text, p_company_name text,
    p_job_title text, p_external_id text)
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
                          external_id, created_at, updated_at)
    VALUES (p_workspace_id, p_id, p_email, p_phone, p_first_name, p_last_name, p_company_name, p_job_title,
            p_external_id, now(), now())
    RETURNING * INTO c;
    IF p_key IS NOT NULL THEN
        PERFORM idempotency_save(p_workspace_id, p_client_id, p_path, p_key, p_request_hash, to_jsonb(c), NULL);
    END IF;
    RETURN NEXT c;
END
$$;
-- +goose StatementEnd

-- lead_create inserts a lead about the contact p_contact_id, or, when that
-- is NULL, about the contact with email p_contact_email, which it creates
-- (with id p_contact_new_id and the other p_contact_ fields) when there is
-- none. It returns the lead, or no row when p_contact_id is not a contact
-- of the workspace. The title defaults to lead_default_title. Keys work as
-- in contact_create. A concurrent request that creates the same inline
-- contact first makes this one raise the unique violation of
-- contacts_email; a retry finds the contact.
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

-- +goose Down
DROP FUNCTION lead_create;
DROP FUNCTION contact_create;
DROP FUNCTION lead_default_title;
DROP FUNCTION idempotency_save;
DROP FUNCTION idempotency_claim;
DROP INDEX idempotency_keys_created;
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
DELETE FROM idempotency_keys;
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_answer;
ALTER TABLE idempotency_keys DROP COLUMN record;
ALTER TABLE idempotency_keys ALTER COLUMN response SET NOT NULL;
