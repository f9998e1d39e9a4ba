-- LeadCreate creates a lead, and its inline contact when needed, in one
-- statement (see lead_create in migration 00010). No row means contact_id
-- is not a contact of the workspace. Keys work as in ContactCreate. A taken
-- external id fails with a unique violation; LeadIDByExternalID then names
-- the holder.
-- name: LeadCreate :one
SELECT * FROM lead_create(@workspace_id, @client_id, @path, sqlc.narg(key), sqlc.narg(request_hash),
                          sqlc.narg(lock_key), sqlc.narg(fresh_since), @id, sqlc.narg(contact_id),
                          @contact_new_id, sqlc.narg(contact_email), sqlc.narg(contact_phone),
                          sqlc.narg(contact_first_name), sqlc.narg(contact_last_name),
                          sqlc.narg(contact_company_name), sqlc.narg(contact_job_title), sqlc.narg(title),
                          @status, sqlc.narg(source), sqlc.narg(campaign), sqlc.narg(message),
                          sqlc.narg(value_amount), sqlc.narg(value_currency), sqlc.narg(external_id));

-- name: LeadIDByExternalID :one
SELECT id FROM leads WHERE workspace_id = @workspace_id AND external_id = @external_id;

-- name: LeadGet :one
SELECT * FROM leads WHERE workspace_id = @workspace_id AND id = @id;

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

-- ContactCreateInline inserts the new inline contacts of a lead batch: one
-- per email not yet taken (the first item's fields win) and one per
-- phone-only item, in email order so that concurrent batches take the
-- unique index's locks in one order. It returns the ids it inserted.
-- name: ContactCreateInline :many
INSERT INTO contacts (workspace_id, id, email, phone, first_name, last_name, company_name, job_title,
                      created_at, updated_at)
SELECT DISTINCT ON (coalesce(x.email, x.new_contact_id::text))
       @workspace_id, x.new_contact_id, x.email, x.phone, x.first_name, x.last_name, x.company_name,
       x.job_title, now(), now()
FROM jsonb_to_recordset(@items::jsonb) AS x(idx int, new_contact_id uuid, email text, phone text,
                                            first_name text, last_name text, company_name text, job_title text)
WHERE x.new_contact_id IS NOT NULL
  AND (x.email IS NULL
       OR NOT EXISTS (SELECT 1 FROM contacts c WHERE c.workspace_id = @workspace_id AND c.email = x.email))
ORDER BY coalesce(x.email, x.new_contact_id::text), x.idx
ON CONFLICT DO NOTHING
RETURNING id;

-- LeadCreateMany inserts the leads of a batch. Each item's contact is its
-- contact_id, else the contact with its email, else its new inline contact
-- (ContactCreateInline ran first, in the same transaction); an item whose
-- contact_id is not a contact of the workspace is skipped, and so is one
-- whose external id is taken, by an existing lead or an earlier item
-- (rows go in external id order, then input order). LeadBatchFailures
-- then says why.
-- name: LeadCreateMany :many
INSERT INTO leads (workspace_id, id, contact_id, title, status, source, campaign, message,
                   value_amount, value_currency, external_id, created_at, updated_at)
SELECT @workspace_id, x.id, c.id, coalesce(x.title, lead_default_title(c.first_name, c.last_name, c.email, c.phone)),
       x.status, x.source, x.campaign, x.message, x.value_amount, x.value_currency, x.external_id, now(), now()
FROM jsonb_to_recordset(@items::jsonb) AS x(idx int, id uuid, contact_id uuid, new_contact_id uuid, email text,
                                            title text, status text, source text, campaign text, message text,
                                            value_amount bigint, value_currency text, external_id text)
CROSS JOIN LATERAL (
    -- LIMIT keeps this a lookup by primary key per item, never a join
    -- over the workspace's contacts.
    SELECT c.id, c.first_name, c.last_name, c.email, c.phone FROM contacts c
    WHERE c.workspace_id = @workspace_id
      AND c.id = coalesce(x.contact_id,
                          (SELECT e.id FROM contacts e WHERE e.workspace_id = @workspace_id AND e.email = x.email),
                          x.new_contact_id)
    LIMIT 1
) c
ORDER BY x.external_id, x.idx
ON CONFLICT (workspace_id, external_id) WHERE external_id IS NOT NULL DO NOTHING
RETURNING *;

-- LeadBatchFailures says, for each item LeadCreateMany skipped, whether
-- its contact_id names a contact (checked first, as lead_create does) and
-- which lead holds its external id.
-- name: LeadBatchFailures :many
SELECT x.idx::int AS idx, c.id AS contact_id, l.id AS existing_id
FROM jsonb_to_recordset(@items::jsonb) AS x(idx int, contact_id uuid, external_id text)
LEFT JOIN contacts c ON c.workspace_id = @workspace_id AND c.id = x.contact_id
LEFT JOIN leads l ON l.workspace_id = @workspace_id AND l.external_id = x.external_id
ORDER BY x.idx;

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
