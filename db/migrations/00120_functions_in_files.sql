-- +goose Up

-- Live database code gets one source file each (db/functions/NAME.sql),
-- applied after the versioned migrations whenever its SHA-256 differs from
-- the one recorded here (db/functions.go). Versioned migrations keep the
-- tables, indexes, triggers and data moves, and never restate a function
-- again: a change to a function is a diff of its file. release is the
-- release whose binary applied the file: an older one, started again on
-- the database during an upgrade or a rollback, leaves a newer release's
-- functions as they are (the newer release keeps serving on them).
CREATE TABLE schema_functions (
    name       text PRIMARY KEY,
    sha256     bytea NOT NULL,
    release    text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- webhook_record ended one attempt; webhook_record_many (00107) took its
-- place, and no query has called it since, in this release or the one
-- before (38cd6c9).
DROP FUNCTION webhook_record(uuid, uuid, bigint, bigint, int, text, timestamptz, int, int, text);

-- +goose Down
DROP TABLE schema_functions;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_record(p_workspace_id uuid, p_endpoint_id uuid, p_xid bigint, p_seq bigint, p_attempts int,
                                          p_outcome text, p_next timestamptz, p_response_status int, p_duration_ms int,
                                          p_error text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    d webhook_deliveries;
BEGIN
    IF p_outcome = 'succeeded' THEN
        DELETE FROM webhook_deliveries
        WHERE workspace_id = p_workspace_id AND endpoint_id = p_endpoint_id AND event_xid = p_xid AND event_seq = p_seq
          AND attempts = p_attempts AND status = 'pending'
        RETURNING * INTO d;
    ELSE
        UPDATE webhook_deliveries
        SET status = CASE p_outcome WHEN 'retry' THEN 'pending' ELSE 'failed' END,
            next_attempt_at = coalesce(p_next, next_attempt_at), lease_until = NULL
        WHERE workspace_id = p_workspace_id AND endpoint_id = p_endpoint_id AND event_xid = p_xid AND event_seq = p_seq
          AND attempts = p_attempts AND status = 'pending'
        RETURNING * INTO d;
    END IF;
    IF d.endpoint_id IS NULL THEN
        RETURN false;
    END IF;
    INSERT INTO webhook_attempts (workspace_id, endpoint_id, event_id, event_type, attempt, status, response_status,
                                  duration_ms, error)
    VALUES (p_workspace_id, p_endpoint_id, d.event_id, d.event_type, p_attempts,
            CASE p_outcome WHEN 'succeeded' THEN 'succeeded' WHEN 'retry' THEN 'pending' ELSE 'failed' END,
            p_response_status, p_duration_ms, p_error);
    IF p_outcome = 'succeeded' THEN
        UPDATE webhook_endpoints SET last_success_at = now()
        WHERE workspace_id = p_workspace_id AND id = p_endpoint_id
          AND (last_success_at IS NULL OR last_success_at < now() - interval '1 second');
    ELSIF p_outcome = 'gone' THEN
        UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'gone', updated_at = now()
        WHERE workspace_id = p_workspace_id AND id = p_endpoint_id AND status = 'enabled';
    ELSIF p_outcome = 'failed' THEN
        UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'failing', updated_at = now()
        WHERE workspace_id = p_workspace_id AND id = p_endpoint_id AND status = 'enabled'
          AND (last_success_at IS NULL OR last_success_at < d.first_attempt_at);
    END IF;
    RETURN true;
END
$$;
-- +goose StatementEnd
