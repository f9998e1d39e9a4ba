-- idempotency_claim locks the key's row when it finds one too old to
-- answer (it read only fresh rows). Since 00117 a group
-- of creates saves its records at the end of its statement, outside every
-- request's own block: a reused key whose old row the retention sweep was
-- deleting made that save wait, and a lock_not_available there failed the
-- whole group (each create then ran again alone). The wait is now the
-- claim's, inside the request's block: that request alone is left to run
-- again, the others of the group are created (TestAnExpiredKeyLockedElsewhereHoldsUpOnlyItsCreate).
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
    WHERE workspace_id = p_workspace_id AND client_id = p_client_id AND path = p_path AND key = p_key;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF k.created_at < p_fresh_since THEN
        -- Too old to answer: this request's record replaces the row
        -- (idempotency_save, or idempotency_keep at the end of a group's
        -- statement). It is locked here, so that a wait for it (the
        -- retention sweep deleting it) is this claim's, inside the
        -- request's own block in lead_create_requests, where
        -- lock_not_available leaves the request alone to run again; at the
        -- group's end it would fail the whole group (00117). Only an old
        -- row pays for the lock (FOR UPDATE on every claim cost 12,000
        -- instructions a create).
        PERFORM 1 FROM idempotency_keys
        WHERE workspace_id = p_workspace_id AND client_id = p_client_id AND path = p_path AND key = p_key
        FOR NO KEY UPDATE;
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
