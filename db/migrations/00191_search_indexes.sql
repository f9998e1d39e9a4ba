-- +goose NO TRANSACTION

-- +goose Up

-- The indexes of q and of customFields.<key>=<value> (migration 00190),
-- each led by workspace_id (btree_gin), so that a list reads the entries
-- of its own workspace. A q word is a LIKE '%word%' on the search text
-- (pg_trgm's GIN operator class serves it from the word's trigrams); an
-- equality filter is a containment, custom_fields @> '{"key": value}',
-- which jsonb_path_ops serves (and is smaller than the default jsonb_ops).
-- Built CONCURRENTLY, outside a transaction, so that the previous release
-- keeps writing meanwhile; a build that failed half-way leaves an invalid
-- index behind, dropped first, so the migration runs again from the start.
DROP INDEX CONCURRENTLY IF EXISTS contacts_search;
CREATE INDEX CONCURRENTLY IF NOT EXISTS contacts_search ON contacts USING gin (
    workspace_id,
    search.contact_text(email, first_name, last_name, company_name, phone, external_id) extensions.gin_trgm_ops
);
DROP INDEX CONCURRENTLY IF EXISTS leads_search;
CREATE INDEX CONCURRENTLY IF NOT EXISTS leads_search ON leads USING gin (
    workspace_id, search.lead_text(title, campaign, source, external_id) extensions.gin_trgm_ops
);
DROP INDEX CONCURRENTLY IF EXISTS contacts_custom_fields;
CREATE INDEX CONCURRENTLY IF NOT EXISTS contacts_custom_fields ON contacts USING gin (
    workspace_id, custom_fields jsonb_path_ops
);
DROP INDEX CONCURRENTLY IF EXISTS leads_custom_fields;
CREATE INDEX CONCURRENTLY IF NOT EXISTS leads_custom_fields ON leads USING gin (
    workspace_id, custom_fields jsonb_path_ops
);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS leads_custom_fields;
DROP INDEX CONCURRENTLY IF EXISTS contacts_custom_fields;
DROP INDEX CONCURRENTLY IF EXISTS leads_search;
DROP INDEX CONCURRENTLY IF EXISTS contacts_search;
