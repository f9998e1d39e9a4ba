-- +goose Up

-- A retry whose Idempotency-Key is held by an earlier attempt still
-- waiting for the synchronous standby is 503, not 409 (make test-ha,
-- partition: 14 to 84 keyed retries a run were answered 409
-- idempotency_key_in_use while the cut-off old primary held their first
-- attempt's lock). 55P03 (lock_not_available) is what the service and the
-- lead functions already read as "not now".
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION idempotency_claim(p_workspace_id uuid, p_client_id uuid, p_path text, p_key text,
                                  p_request_hash bytea, p_lock_key bigint, p_fresh_since timestamptz)
RETURNS idempotency_keys LANGUAGE plpgsql AS $$
DECLARE
    k idempotency_keys;
BEGIN
    IF NOT pg_try_advisory_xact_lock(p_lock_key) THEN
        -- The holder may be an earlier attempt whose COMMIT waits for a
        -- synchronous standby that does not answer (a primary cut off from
        -- its standbys): the service gave up on it and answered 503, and
        -- its outcome stays unknown until the standby answers or a
        -- failover settles it. Its key is then unavailable too (503, to
        -- retry later), not in use by a request in flight (409).
        IF EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                   WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                     AND l.classid = ((p_lock_key >> 32) & 4294967295)::oid
                     AND l.objid = (p_lock_key & 4294967295)::oid
                     AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                     AND a.wait_event = 'SyncRep') THEN
            RAISE EXCEPTION 'an earlier request with this Idempotency-Key waits for the synchronous standby'
                USING ERRCODE = '55P03';
        END IF;
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
