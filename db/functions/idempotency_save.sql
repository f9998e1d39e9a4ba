-- idempotency_save was a SQL function. Called from lead_create and
-- contact_create (PERFORM), it ran through the SQL-function executor,
-- which parses, analyses and plans its INSERT again on every call: a tenth
-- of PostgreSQL's CPU per single create. As PL/pgSQL, its INSERT is
-- planned once per session and cached, like the callers' own statements.
CREATE OR REPLACE FUNCTION idempotency_save(p_workspace_id uuid, p_client_id uuid, p_path text, p_key text,
                                            p_request_hash bytea, p_record jsonb, p_response bytea)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO idempotency_keys (workspace_id, client_id, path, key, request_hash, record, response)
    VALUES (p_workspace_id, p_client_id, p_path, p_key, p_request_hash, p_record, p_response)
    ON CONFLICT (workspace_id, client_id, path, key) DO UPDATE
    SET request_hash = EXCLUDED.request_hash, record = EXCLUDED.record, response = EXCLUDED.response,
        created_at = now();
END
$$;
