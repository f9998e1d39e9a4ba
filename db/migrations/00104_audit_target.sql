-- +goose Up
-- target_id names what an audited action was about when that is neither a
-- client nor a member: the webhook endpoint ("whe_…") of a
-- webhook_endpoint.* action, so that the log says which one changed.
ALTER TABLE audit_events ADD COLUMN target_id text CHECK (length(target_id) <= 64);

-- +goose Down
ALTER TABLE audit_events DROP COLUMN target_id;
