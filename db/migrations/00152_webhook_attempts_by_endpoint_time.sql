-- +goose NO TRANSACTION
-- +goose Up

-- The settings page shows each endpoint's health (issue 36; docs/webhooks.md,
-- "Endpoint health in the settings page"): a chart of its succeeded and
-- failed attempts per hour over the last 24 hours, and since when it has
-- been failing. Both read an endpoint's attempts by time, which neither the
-- primary key (workspace_id, endpoint_id, id) nor the BRIN index on at (of
-- every workspace) does without reading the endpoint's whole delivery log:
-- this index does, with the status beside it, so the chart is an
-- index-only range scan of one endpoint's last 24 hours.
--
-- Built CONCURRENTLY, outside a transaction, so that attempts go on being
-- written while it builds. A build that failed half-way leaves an invalid
-- index of this name behind, which IF NOT EXISTS would keep: the DROP
-- removes it first, so the file is safe to run again. The previous release
-- never reads the index; it only keeps it up to date on insert.
DROP INDEX CONCURRENTLY IF EXISTS webhook_attempts_endpoint_at;
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_attempts_endpoint_at
    ON webhook_attempts (workspace_id, endpoint_id, at) INCLUDE (status);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS webhook_attempts_endpoint_at;
