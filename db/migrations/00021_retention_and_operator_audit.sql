-- +goose Up

-- Bounded background sweeps delete access tokens 30 days after they
-- expired and audit events after 400 days; these indexes let each run find
-- its oldest rows without scanning the tables. Expiry times of new tokens
-- only grow, so the index is appended to at its right edge.
CREATE INDEX access_tokens_expires ON access_tokens (expires_at);
CREATE INDEX audit_events_created ON audit_events (created_at);

-- Workspaces and members are created by the operator (the caller of the
-- admin API, trusted by the admin token or by the loopback address), not by
-- a member: such audit events have no actor member. member_id names the
-- member an action was about (member.add).
ALTER TABLE audit_events ALTER COLUMN actor_member_id DROP NOT NULL;
ALTER TABLE audit_events ADD COLUMN member_id uuid;

-- +goose Down
ALTER TABLE audit_events DROP COLUMN member_id;
DELETE FROM audit_events WHERE actor_member_id IS NULL;
ALTER TABLE audit_events ALTER COLUMN actor_member_id SET NOT NULL;
DROP INDEX audit_events_created;
DROP INDEX access_tokens_expires;
