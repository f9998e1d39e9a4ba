-- ContactCreate creates a contact in one statement (see contact_create in
-- migration 00010): with an Idempotency-Key (key not NULL) a replay returns
-- the stored row, whose id is not the one proposed. A taken email or
-- external id fails with a unique violation; ContactConflict then names the
-- holder.
-- name: ContactCreate :one
SELECT * FROM contact_create(@workspace_id, @client_id, @path, sqlc.narg(key), sqlc.narg(request_hash),
                             sqlc.narg(lock_key), sqlc.narg(fresh_since), @id, sqlc.narg(email), sqlc.narg(phone),
                             sqlc.narg(first_name), sqlc.narg(last_name), sqlc.narg(company_name),
                             sqlc.narg(job_title), sqlc.narg(external_id));

-- name: ContactConflict :one
SELECT id FROM contacts
WHERE workspace_id = @workspace_id
  AND (email = sqlc.narg(email) OR external_id = sqlc.narg(external_id))
ORDER BY email = sqlc.narg(email) DESC
LIMIT 1;

-- name: ContactGetByEmail :one
SELECT * FROM contacts WHERE workspace_id = @workspace_id AND email = @email;

-- name: ContactGet :one
SELECT * FROM contacts WHERE workspace_id = @workspace_id AND id = @id;

-- The four ContactList queries differ only in sort key and direction. Each
-- keeps a fixed ORDER BY so that PostgreSQL walks an index on
-- (workspace_id, sort key, id); the optional filters fold away because the
-- pool plans every statement with its actual parameters (see db.Open).

-- name: ContactListCreatedAsc :many
SELECT * FROM contacts
WHERE workspace_id = @workspace_id
  AND (sqlc.narg(after_time)::timestamptz IS NULL
       OR (created_at, id) > (sqlc.narg(after_time)::timestamptz, sqlc.narg(after_id)::uuid))
  AND (sqlc.narg(created_since)::timestamptz IS NULL OR created_at >= sqlc.narg(created_since))
  AND (sqlc.narg(updated_since)::timestamptz IS NULL OR updated_at >= sqlc.narg(updated_since))
  AND (sqlc.narg(email)::text IS NULL OR email = sqlc.narg(email))
  AND (sqlc.narg(external_id)::text IS NULL OR external_id = sqlc.narg(external_id))
ORDER BY created_at ASC, id ASC
LIMIT @max_rows;

-- name: ContactListCreatedDesc :many
SELECT * FROM contacts
WHERE workspace_id = @workspace_id
  AND (sqlc.narg(after_time)::timestamptz IS NULL
       OR (created_at, id) < (sqlc.narg(after_time)::timestamptz, sqlc.narg(after_id)::uuid))
  AND (sqlc.narg(created_since)::timestamptz IS NULL OR created_at >= sqlc.narg(created_since))
  AND (sqlc.narg(updated_since)::timestamptz IS NULL OR updated_at >= sqlc.narg(updated_since))
  AND (sqlc.narg(email)::text IS NULL OR email = sqlc.narg(email))
  AND (sqlc.narg(external_id)::text IS NULL OR external_id = sqlc.narg(external_id))
ORDER BY created_at DESC, id DESC
LIMIT @max_rows;

-- name: ContactListUpdatedAsc :many
SELECT * FROM contacts
WHERE workspace_id = @workspace_id
  AND (sqlc.narg(after_time)::timestamptz IS NULL
       OR (updated_at, id) > (sqlc.narg(after_time)::timestamptz, sqlc.narg(after_id)::uuid))
  AND (sqlc.narg(created_since)::timestamptz IS NULL OR created_at >= sqlc.narg(created_since))
  AND (sqlc.narg(updated_since)::timestamptz IS NULL OR updated_at >= sqlc.narg(updated_since))
  AND (sqlc.narg(email)::text IS NULL OR email = sqlc.narg(email))
  AND (sqlc.narg(external_id)::text IS NULL OR external_id = sqlc.narg(external_id))
ORDER BY updated_at ASC, id ASC
LIMIT @max_rows;

-- name: ContactListUpdatedDesc :many
SELECT * FROM contacts
WHERE workspace_id = @workspace_id
  AND (sqlc.narg(after_time)::timestamptz IS NULL
       OR (updated_at, id) < (sqlc.narg(after_time)::timestamptz, sqlc.narg(after_id)::uuid))
  AND (sqlc.narg(created_since)::timestamptz IS NULL OR created_at >= sqlc.narg(created_since))
  AND (sqlc.narg(updated_since)::timestamptz IS NULL OR updated_at >= sqlc.narg(updated_since))
  AND (sqlc.narg(email)::text IS NULL OR email = sqlc.narg(email))
  AND (sqlc.narg(external_id)::text IS NULL OR external_id = sqlc.narg(external_id))
ORDER BY updated_at DESC, id DESC
LIMIT @max_rows;
