-- Every lead create runs lead_create_set (migration 00080), the one
-- find-or-create of a lead's contact: a batch's items through LeadCreateSet,
-- single creates (alone or sharing a commit) through LeadCreateRequests.
-- Items travel as JSON, read as lead_create_request by name, so that an
-- unset field is null; each answers one lead_create_outcome.

-- LeadCreateRequests runs single creates, each with its own workspace and
-- Idempotency-Key, in one statement (see lead_create_requests): one
-- outcome per request, in input order. lock_budget_ms bounds a group's
-- lock waits together; NULL runs them under the role's lock_timeout.
-- name: LeadCreateRequests :many
SELECT * FROM lead_create_requests(
    ARRAY(SELECT jsonb_populate_recordset(NULL::lead_create_request, @requests::jsonb)),
    sqlc.narg(lock_budget_ms)::int);

-- LeadCreateSet creates the items of a batch, all of one workspace, in the
-- batch's transaction (its key is the batch's: see idempotency.InTx): one
-- outcome per item, in input order.
-- name: LeadCreateSet :many
SELECT * FROM lead_create_set(@workspace_id,
    ARRAY(SELECT jsonb_populate_recordset(NULL::lead_create_request, @items::jsonb)));

-- LeadCreate is LeadCreateRequests for one request alone, under the
-- role's lock_timeout, its fields sent as parameters. Its parameters, in
-- order, are the attributes of lead_create_request, and so the fields of
-- every create (dbsqlc.LeadCreateParams).
-- name: LeadCreate :one
SELECT * FROM lead_create_requests(ARRAY[ROW(
    @workspace_id::uuid, @client_id::uuid, @path::text, sqlc.narg(key)::text,
    encode(sqlc.narg(request_hash)::bytea, 'base64'), sqlc.narg(lock_key)::bigint,
    sqlc.narg(fresh_since)::timestamptz, @id::uuid, sqlc.narg(contact_id)::uuid, @contact_new_id::uuid,
    sqlc.narg(contact_email)::text, sqlc.narg(contact_phone)::text, sqlc.narg(contact_first_name)::text,
    sqlc.narg(contact_last_name)::text, sqlc.narg(contact_company_name)::text,
    sqlc.narg(contact_job_title)::text, sqlc.narg(title)::text, @status::text, sqlc.narg(source)::text,
    sqlc.narg(campaign)::text, sqlc.narg(message)::text, sqlc.narg(value_amount)::bigint,
    sqlc.narg(value_currency)::text, sqlc.narg(external_id)::text)::lead_create_request], NULL);

-- name: LeadIDByExternalID :one
SELECT id FROM leads WHERE workspace_id = @workspace_id AND external_id = @external_id;

-- name: LeadGet :one
SELECT * FROM leads WHERE workspace_id = @workspace_id AND id = @id;

-- LeadGetForUpdate is LeadGet locking the row, as ContactGetForUpdate.
-- name: LeadGetForUpdate :one
SELECT * FROM leads WHERE workspace_id = @workspace_id AND id = @id FOR NO KEY UPDATE;

-- LeadDefaultTitle is the title a lead about contact_id takes when its
-- title is cleared, so that an update can tell whether clearing it changes
-- anything. No row: no such contact in the workspace.
-- name: LeadDefaultTitle :one
SELECT lead_default_title(first_name, last_name, email, phone)::text AS title
FROM contacts WHERE workspace_id = @workspace_id AND id = @contact_id;

-- LeadUpdate writes every field of a lead the handler merged from the row
-- it read, provided the row has not changed since (its change_xid is still
-- expected_xid); no row means it has, or it is gone. A NULL title is the
-- contact's default title again. A contact_id that is not a contact of the
-- workspace fails the foreign key.
-- name: LeadUpdate :one
UPDATE leads
SET contact_id = @contact_id,
    title = coalesce(sqlc.narg(title),
                     (SELECT lead_default_title(c.first_name, c.last_name, c.email, c.phone)
                      FROM contacts c WHERE c.workspace_id = @workspace_id AND c.id = @contact_id),
                     'Lead'),
    status = @status, source = sqlc.narg(source),
    campaign = sqlc.narg(campaign), message = sqlc.narg(message), value_amount = sqlc.narg(value_amount),
    value_currency = sqlc.narg(value_currency), external_id = sqlc.narg(external_id),
    updated_at = greatest(now(), leads.updated_at)
WHERE leads.workspace_id = @workspace_id AND leads.id = @id AND leads.change_xid = @expected_xid
RETURNING *;

-- LeadListChanges is the sync walk (sort=updatedAt): leads in the order
-- their changes became visible, (change_xid, id), and only below the
-- snapshot's xmin, so that no change can still appear behind the position
-- (see migration 00011).
-- name: LeadListChanges :many
SELECT * FROM leads
WHERE workspace_id = @workspace_id
  AND change_xid < partner_sync_horizon()
  AND (sqlc.narg(after_xid)::bigint IS NULL
       OR (change_xid, id) > (sqlc.narg(after_xid)::bigint, sqlc.narg(after_id)::uuid))
  AND (sqlc.narg(created_since)::timestamptz IS NULL OR created_at >= sqlc.narg(created_since))
  AND (sqlc.narg(updated_since)::timestamptz IS NULL OR updated_at >= sqlc.narg(updated_since))
  AND (sqlc.narg(contact_id)::uuid IS NULL OR contact_id = sqlc.narg(contact_id))
  AND (sqlc.narg(status)::text IS NULL OR status = sqlc.narg(status))
  AND (sqlc.narg(source)::text IS NULL OR source = sqlc.narg(source))
  AND (sqlc.narg(external_id)::text IS NULL OR external_id = sqlc.narg(external_id))
ORDER BY change_xid ASC, id ASC
LIMIT @max_rows;

-- The other LeadList queries differ only in sort key and direction. Each
-- keeps a fixed ORDER BY so that PostgreSQL walks an index on
-- (workspace_id, sort key, id); the optional filters fold away because the
-- pool plans every statement with its actual parameters (see db.Open).
-- LeadListUpdatedAsc is no longer the API's sort=updatedAt: it is the walk
-- by timestamp alone, which TestSyncNeverMissesAChange shows to lose a
-- change that commits late.

-- name: LeadListCreatedAsc :many
SELECT * FROM leads
WHERE workspace_id = @workspace_id
  AND (sqlc.narg(after_time)::timestamptz IS NULL
       OR (created_at, id) > (sqlc.narg(after_time)::timestamptz, sqlc.narg(after_id)::uuid))
  AND (sqlc.narg(created_since)::timestamptz IS NULL OR created_at >= sqlc.narg(created_since))
  AND (sqlc.narg(updated_since)::timestamptz IS NULL OR updated_at >= sqlc.narg(updated_since))
  AND (sqlc.narg(contact_id)::uuid IS NULL OR contact_id = sqlc.narg(contact_id))
  AND (sqlc.narg(status)::text IS NULL OR status = sqlc.narg(status))
  AND (sqlc.narg(source)::text IS NULL OR source = sqlc.narg(source))
  AND (sqlc.narg(external_id)::text IS NULL OR external_id = sqlc.narg(external_id))
ORDER BY created_at ASC, id ASC
LIMIT @max_rows;

-- name: LeadListCreatedDesc :many
SELECT * FROM leads
WHERE workspace_id = @workspace_id
  AND (sqlc.narg(after_time)::timestamptz IS NULL
       OR (created_at, id) < (sqlc.narg(after_time)::timestamptz, sqlc.narg(after_id)::uuid))
  AND (sqlc.narg(created_since)::timestamptz IS NULL OR created_at >= sqlc.narg(created_since))
  AND (sqlc.narg(updated_since)::timestamptz IS NULL OR updated_at >= sqlc.narg(updated_since))
  AND (sqlc.narg(contact_id)::uuid IS NULL OR contact_id = sqlc.narg(contact_id))
  AND (sqlc.narg(status)::text IS NULL OR status = sqlc.narg(status))
  AND (sqlc.narg(source)::text IS NULL OR source = sqlc.narg(source))
  AND (sqlc.narg(external_id)::text IS NULL OR external_id = sqlc.narg(external_id))
ORDER BY created_at DESC, id DESC
LIMIT @max_rows;

-- name: LeadListUpdatedAsc :many
SELECT * FROM leads
WHERE workspace_id = @workspace_id
  AND (sqlc.narg(after_time)::timestamptz IS NULL
       OR (updated_at, id) > (sqlc.narg(after_time)::timestamptz, sqlc.narg(after_id)::uuid))
  AND (sqlc.narg(created_since)::timestamptz IS NULL OR created_at >= sqlc.narg(created_since))
  AND (sqlc.narg(updated_since)::timestamptz IS NULL OR updated_at >= sqlc.narg(updated_since))
  AND (sqlc.narg(contact_id)::uuid IS NULL OR contact_id = sqlc.narg(contact_id))
  AND (sqlc.narg(status)::text IS NULL OR status = sqlc.narg(status))
  AND (sqlc.narg(source)::text IS NULL OR source = sqlc.narg(source))
  AND (sqlc.narg(external_id)::text IS NULL OR external_id = sqlc.narg(external_id))
ORDER BY updated_at ASC, id ASC
LIMIT @max_rows;

-- name: LeadListUpdatedDesc :many
SELECT * FROM leads
WHERE workspace_id = @workspace_id
  AND (sqlc.narg(after_time)::timestamptz IS NULL
       OR (updated_at, id) < (sqlc.narg(after_time)::timestamptz, sqlc.narg(after_id)::uuid))
  AND (sqlc.narg(created_since)::timestamptz IS NULL OR created_at >= sqlc.narg(created_since))
  AND (sqlc.narg(updated_since)::timestamptz IS NULL OR updated_at >= sqlc.narg(updated_since))
  AND (sqlc.narg(contact_id)::uuid IS NULL OR contact_id = sqlc.narg(contact_id))
  AND (sqlc.narg(status)::text IS NULL OR status = sqlc.narg(status))
  AND (sqlc.narg(source)::text IS NULL OR source = sqlc.narg(source))
  AND (sqlc.narg(external_id)::text IS NULL OR external_id = sqlc.narg(external_id))
ORDER BY updated_at DESC, id DESC
LIMIT @max_rows;

-- LeadListNewest is LeadListCreatedDesc with no filter, prepared and
-- cached like ContactListNewest.
-- name: LeadListNewest :many
SELECT * FROM leads
WHERE workspace_id = @workspace_id
  AND (created_at, id) < (@after_time::timestamptz, @after_id::uuid)
ORDER BY created_at DESC, id DESC
LIMIT @max_rows;

-- ContactCreateInline, LeadCreateMany and LeadBatchFailures were the
-- batch's own set-based create (its items as parallel arrays, '' and the
-- nil UUID standing for NULL); lead_create_set replaced them (migration
-- 00080). The service no longer runs them: they stay only while
-- db/explain_test.go still checks their plans, and go with those cases.

-- ContactCreateInline inserts the new inline contacts of a lead batch: one
-- per email not yet taken (the first item's fields win) and one per
-- phone-only item, in email order so that concurrent batches take the
-- unique index's locks in one order. It returns the ids it inserted.
-- name: ContactCreateInline :many
INSERT INTO contacts (workspace_id, id, email, phone, first_name, last_name, company_name, job_title,
                      created_at, updated_at)
SELECT DISTINCT ON (coalesce(nullif(x.email, ''), x.id::text))
       @workspace_id, x.id, nullif(x.email, ''), nullif(x.phone, ''), nullif(x.first_name, ''),
       nullif(x.last_name, ''), nullif(x.company_name, ''), nullif(x.job_title, ''), now(), now()
FROM (SELECT unnest(@idx::int[]) AS idx,
             unnest(@ids::text[])::uuid AS id,
             unnest(@emails::text[]) AS email,
             unnest(@phones::text[]) AS phone,
             unnest(@first_names::text[]) AS first_name,
             unnest(@last_names::text[]) AS last_name,
             unnest(@company_names::text[]) AS company_name,
             unnest(@job_titles::text[]) AS job_title) AS x
WHERE x.email = ''
   OR NOT EXISTS (SELECT 1 FROM contacts c WHERE c.workspace_id = @workspace_id AND c.email = x.email)
ORDER BY coalesce(nullif(x.email, ''), x.id::text), x.idx
ON CONFLICT DO NOTHING
RETURNING id;

-- LeadCreateMany inserts the leads of a batch. Each item's contact is its
-- contact_id, else the contact with its email, else its new inline contact
-- (ContactCreateInline ran first, in the same transaction); an item whose
-- contact_id is not a contact of the workspace is skipped, and so is one
-- whose external id is taken, by an existing lead or an earlier item
-- (rows go in external id order, then input order). LeadBatchFailures
-- then says why. A value_amount of -1 stands for NULL.
-- name: LeadCreateMany :many
INSERT INTO leads (workspace_id, id, contact_id, title, status, source, campaign, message,
                   value_amount, value_currency, external_id, created_at, updated_at)
SELECT @workspace_id, x.id, c.id,
       coalesce(nullif(x.title, ''), lead_default_title(c.first_name, c.last_name, c.email, c.phone)),
       x.status, nullif(x.source, ''), nullif(x.campaign, ''), nullif(x.message, ''), nullif(x.value_amount, -1),
       nullif(x.value_currency, ''), nullif(x.external_id, ''), now(), now()
FROM (SELECT unnest(@idx::int[]) AS idx,
             unnest(@ids::text[])::uuid AS id,
             unnest(@contact_ids::text[])::uuid AS contact_id,
             unnest(@emails::text[]) AS email,
             unnest(@new_contact_ids::text[])::uuid AS new_contact_id,
             unnest(@titles::text[]) AS title,
             unnest(@statuses::text[]) AS status,
             unnest(@sources::text[]) AS source,
             unnest(@campaigns::text[]) AS campaign,
             unnest(@messages::text[]) AS message,
             unnest(@value_amounts::bigint[]) AS value_amount,
             unnest(@value_currencies::text[]) AS value_currency,
             unnest(@external_ids::text[]) AS external_id) AS x
CROSS JOIN LATERAL (
    -- LIMIT keeps this a lookup by primary key per item, never a join
    -- over the workspace's contacts.
    SELECT c.id, c.first_name, c.last_name, c.email, c.phone FROM contacts c
    WHERE c.workspace_id = @workspace_id
      AND c.id = coalesce(nullif(x.contact_id, '00000000-0000-0000-0000-000000000000'),
                          (SELECT e.id FROM contacts e WHERE e.workspace_id = @workspace_id AND e.email = nullif(x.email, '')),
                          nullif(x.new_contact_id, '00000000-0000-0000-0000-000000000000'))
    LIMIT 1
) c
ORDER BY nullif(x.external_id, ''), x.idx
ON CONFLICT (workspace_id, external_id) WHERE external_id IS NOT NULL DO NOTHING
RETURNING *;

-- LeadBatchFailures says, for each item (idx) LeadCreateMany skipped,
-- whether its contact_id names a contact (checked first, as lead_create
-- does) and which lead holds its external id.
-- name: LeadBatchFailures :many
SELECT x.idx::int AS idx, c.id AS contact_id, l.id AS existing_id
FROM (SELECT unnest(@idx::int[]) AS idx,
             unnest(@contact_ids::text[])::uuid AS contact_id,
             unnest(@external_ids::text[]) AS external_id) AS x
LEFT JOIN contacts c ON c.workspace_id = @workspace_id AND c.id = x.contact_id
LEFT JOIN leads l ON l.workspace_id = @workspace_id AND l.external_id = nullif(x.external_id, '')
ORDER BY x.idx;

