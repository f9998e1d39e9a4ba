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

-- The four LeadList queries differ only in sort key and direction. Each
-- keeps a fixed ORDER BY so that PostgreSQL walks an index on
-- (workspace_id, sort key, id); the optional filters fold away because the
-- pool plans every statement with its actual parameters (see db.Open).

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
