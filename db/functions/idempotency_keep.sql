-- idempotency_keep is idempotency_save for the records of many keyed
-- creates at once (no two with the same key), one INSERT for all.
CREATE OR REPLACE FUNCTION idempotency_keep(p_workspace_ids uuid[], p_client_ids uuid[], p_paths text[], p_keys text[],
                                 p_request_hashes bytea[], p_records jsonb[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    -- plpgsql, not sql: the INSERT's plan is kept for the session, where
    -- a sql function would plan it on every call.
    INSERT INTO idempotency_keys (workspace_id, client_id, path, key, request_hash, record)
    SELECT * FROM unnest(p_workspace_ids, p_client_ids, p_paths, p_keys, p_request_hashes, p_records)
    ON CONFLICT (workspace_id, client_id, path, key) DO UPDATE
    SET request_hash = EXCLUDED.request_hash, record = EXCLUDED.record, response = NULL, created_at = now();
END
$$;
