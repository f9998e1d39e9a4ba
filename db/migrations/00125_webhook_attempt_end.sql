-- +goose Up

-- webhook_attempt_end is the end of one delivery attempt as the engine
-- sends it to webhook_attempts_end (db/functions): items travel as JSON
-- read by name (jsonb_populate_recordset), as the lead creates' do, so a
-- value the attempt has not is SQL NULL, never a stand-in: next_attempt_at
-- is NULL when the outcome sets none (succeeded, gone, failed),
-- response_status when no HTTP answer came (the connection failed),
-- error when the attempt succeeded. webhook_record_many, which took
-- arrays with '1900-01-01', 0 and '' for these, stays for the previous
-- release.
CREATE TYPE webhook_attempt_end AS (
    workspace_id    uuid,
    endpoint_id     uuid,
    event_xid       bigint,
    event_seq       bigint,
    attempt         int,
    outcome         text,
    next_attempt_at timestamptz,
    response_status int,
    duration_ms     int,
    error           text
);

-- +goose Down
-- The function file that takes the type (db/functions/webhook_attempts_end.sql)
-- goes with it, and its record, so that the next up applies it again.
DROP FUNCTION IF EXISTS webhook_attempts_end(webhook_attempt_end[]);
DELETE FROM schema_functions WHERE name = 'webhook_attempts_end';
DROP TYPE webhook_attempt_end;
