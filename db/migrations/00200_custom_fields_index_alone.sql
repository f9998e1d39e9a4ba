-- +goose NO TRANSACTION

-- +goose Up

-- The equality filters' indexes without workspace_id. Led by it (00191,
-- btree_gin), a GIN scan reads the posting list of the workspace's entry
-- too, every record of the workspace: over 1M contacts a filtered page took
-- 20 times the unfiltered one (make bench-scale, 2026-11-29). On
-- custom_fields alone it reads the value's entries only, a few records,
-- and the workspace is checked on those rows (every query names it), as a
-- heap recheck. Built CONCURRENTLY, then the old ones dropped CONCURRENTLY:
-- neither release's queries name an index, and the previous release
-- (1.1.0) never reads custom_fields. A build that failed half-way leaves
-- an invalid index behind, dropped first, so the migration runs again.
DROP INDEX CONCURRENTLY IF EXISTS contacts_custom_fields_values;
CREATE INDEX CONCURRENTLY IF NOT EXISTS contacts_custom_fields_values ON contacts USING gin (custom_fields jsonb_path_ops);
DROP INDEX CONCURRENTLY IF EXISTS leads_custom_fields_values;
CREATE INDEX CONCURRENTLY IF NOT EXISTS leads_custom_fields_values ON leads USING gin (custom_fields jsonb_path_ops);
DROP INDEX CONCURRENTLY IF EXISTS contacts_custom_fields;
DROP INDEX CONCURRENTLY IF EXISTS leads_custom_fields;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS leads_custom_fields ON leads USING gin (workspace_id, custom_fields jsonb_path_ops);
CREATE INDEX CONCURRENTLY IF NOT EXISTS contacts_custom_fields ON contacts USING gin (workspace_id, custom_fields jsonb_path_ops);
DROP INDEX CONCURRENTLY IF EXISTS leads_custom_fields_values;
DROP INDEX CONCURRENTLY IF EXISTS contacts_custom_fields_values;
