-- +goose NO TRANSACTION

-- +goose Up

-- The audit log's filters (issue 36: the settings page's "Audit log" and
-- ListAuditEvents by action, actor, client and changes or reads), each
-- walked newest first within one workspace, so a page of a rare action,
-- actor or client, or of the changes among many reads, reads what it
-- shows and not the workspace's whole log (kept 400 days). Built
-- CONCURRENTLY, outside a transaction, so that the previous release keeps
-- writing events meanwhile. A build that failed half-way leaves an
-- invalid index behind: each is dropped first, so the migration runs
-- again from the start. Reads are the actions named "….list"
-- (service/admin, IsRead); audit_events_changes holds the rest, the
-- settings page's default view. audit_events_actor keeps the events of no
-- member too (the operator's and the clients' own), for the operator
-- filter.
DROP INDEX CONCURRENTLY IF EXISTS audit_events_action;
CREATE INDEX CONCURRENTLY IF NOT EXISTS audit_events_action ON audit_events (workspace_id, action, id);
DROP INDEX CONCURRENTLY IF EXISTS audit_events_actor;
CREATE INDEX CONCURRENTLY IF NOT EXISTS audit_events_actor ON audit_events (workspace_id, actor_member_id, id);
DROP INDEX CONCURRENTLY IF EXISTS audit_events_client;
CREATE INDEX CONCURRENTLY IF NOT EXISTS audit_events_client ON audit_events (workspace_id, client_id, id)
    WHERE client_id IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS audit_events_changes;
CREATE INDEX CONCURRENTLY IF NOT EXISTS audit_events_changes ON audit_events (workspace_id, id)
    WHERE action NOT LIKE '%.list';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS audit_events_changes;
DROP INDEX CONCURRENTLY IF EXISTS audit_events_client;
DROP INDEX CONCURRENTLY IF EXISTS audit_events_actor;
DROP INDEX CONCURRENTLY IF EXISTS audit_events_action;
