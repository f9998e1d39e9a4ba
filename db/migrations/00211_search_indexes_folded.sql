-- +goose NO TRANSACTION

-- +goose Up

-- The search indexes on search.contact_folded and search.lead_folded
-- (00210), built CONCURRENTLY beside the old ones, which then go, with the
-- SQL functions they were on. No release but this one searches (1.1.0 has
-- no q), so the queries move in the same release. A build that failed
-- half-way leaves an invalid index behind, dropped first, so the migration
-- runs again.
DROP INDEX CONCURRENTLY IF EXISTS contacts_search_folded;
CREATE INDEX CONCURRENTLY IF NOT EXISTS contacts_search_folded ON contacts USING gin (
    workspace_id,
    search.contact_folded(email, first_name, last_name, company_name, phone, external_id) extensions.gin_trgm_ops
);
DROP INDEX CONCURRENTLY IF EXISTS leads_search_folded;
CREATE INDEX CONCURRENTLY IF NOT EXISTS leads_search_folded ON leads USING gin (
    workspace_id, search.lead_folded(title, campaign, source, external_id) extensions.gin_trgm_ops
);
DROP INDEX CONCURRENTLY IF EXISTS contacts_search;
DROP INDEX CONCURRENTLY IF EXISTS leads_search;
DROP FUNCTION IF EXISTS search.contact_text(text, text, text, text, text, text);
DROP FUNCTION IF EXISTS search.lead_text(text, text, text, text);

-- +goose Down
-- +goose StatementBegin
CREATE FUNCTION search.contact_text(email text, first_name text, last_name text, company_name text, phone text,
                                    external_id text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT search.fold(concat_ws(E'\n', email, first_name, last_name, company_name, phone, external_id)) $$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION search.lead_text(title text, campaign text, source text, external_id text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT search.fold(concat_ws(E'\n', title, campaign, source, external_id)) $$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS leads_search ON leads USING gin (
    workspace_id, search.lead_text(title, campaign, source, external_id) extensions.gin_trgm_ops
);
CREATE INDEX CONCURRENTLY IF NOT EXISTS contacts_search ON contacts USING gin (
    workspace_id,
    search.contact_text(email, first_name, last_name, company_name, phone, external_id) extensions.gin_trgm_ops
);
DROP INDEX CONCURRENTLY IF EXISTS leads_search_folded;
DROP INDEX CONCURRENTLY IF EXISTS contacts_search_folded;
