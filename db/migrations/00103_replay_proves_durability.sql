-- +goose Up

-- A replay proves its stored answer durable (issue 23, found by make
-- test-ha). A create whose COMMIT waited for the synchronous standby past
-- its deadline is committed on the primary alone: the service answers
-- 503, and the keyed retry must not then replay that answer as a 201 while
-- it is still only there (the failover that follows discards it, with the
-- record). A replay read nothing but the stored row, so its transaction
-- wrote no WAL and its COMMIT did not wait. Now the claim rewrites the
-- row it found, unchanged: the replay's COMMIT waits for the standby to have
-- every earlier WAL record, the stored answer's included, and a replay the
-- standby cannot confirm is a 503 like the create.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION idempotency_claim(p_workspace_id uuid, p_client_id uuid, p_path text, p_key text,
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
    -- A write makes this transaction's COMMIT wait for the synchronous
    -- standby, as a create's does (a transaction that wrote no WAL does
    -- not wait, even with an id): the stored answer is then durable
    -- before it is replayed. The row keeps its values.
    UPDATE idempotency_keys SET created_at = k.created_at
    WHERE workspace_id = p_workspace_id AND client_id = p_client_id AND path = p_path AND key = p_key;
    RETURN k;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION idempotency_claim(p_workspace_id uuid, p_client_id uuid, p_path text, p_key text,
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
