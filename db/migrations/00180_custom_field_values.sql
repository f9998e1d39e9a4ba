-- +goose Up

-- Custom field values on the lead create path (issue 35). A create now
-- carries the lead's values and its inline contact's: lead_create_item is
-- lead_create_request with both, read by name from JSON as before, and
-- taken by lead_create_item_set and lead_create_item_requests (db/functions).
-- lead_create_request stays as it is: release 1.1.0 builds it as a ROW of
-- its 24 attributes (its LeadCreate query), which a wider type would
-- refuse, and calls lead_create_set and lead_create_requests with it,
-- which now convert their items and run the new functions.
CREATE TYPE lead_create_item AS (
    workspace_id uuid, client_id uuid, path text, key text, request_hash text, lock_key bigint,
    fresh_since timestamptz, id uuid, contact_id uuid, contact_new_id uuid, contact_email text,
    contact_phone text, contact_first_name text, contact_last_name text, contact_company_name text,
    contact_job_title text, title text, status text, source text, campaign text, message text,
    value_amount bigint, value_currency text, external_id text,
    custom_fields jsonb, contact_custom_fields jsonb);

-- lead_create_item_outcome is lead_create_outcome with custom_fields: an
-- outcome holds every column of leads (TestOutcomeHasEveryLeadColumn),
-- custom_fields of 00170 too. It is a type of its own, answered by the new
-- functions, and lead_create_outcome stays as 1.1.0 knows it: a 1.1.0
-- create under way when a column was added to lead_create_outcome took
-- its result's shape from before and its answer's from after, and failed
-- "returned record type does not match expected record type" (make
-- test-upgrade, a batch). A table, never written, like lead_create_outcome:
-- sqlc reads its columns.
CREATE TABLE lead_create_item_outcome (
    -- An item's index in a batch of at most 100, typed as lead_create_outcome's.
    -- squawk-ignore prefer-bigint-over-int
    idx int NOT NULL, err_code text, err_constraint text, existing_id uuid,
    workspace_id uuid, id uuid, contact_id uuid, title text, status text, source text, campaign text,
    message text, value_amount bigint, value_currency text, external_id text,
    created_at timestamptz, updated_at timestamptz, change_xid bigint, custom_fields jsonb,
    CHECK (false));

-- +goose Down
DROP FUNCTION IF EXISTS lead_create_item_requests(lead_create_item[], int);
DROP FUNCTION IF EXISTS lead_create_item_set(uuid, lead_create_item[]);
DROP TABLE lead_create_item_outcome;
DROP TYPE lead_create_item;
