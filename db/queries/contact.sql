-- ContactCreate creates a contact in one statement (see contact_create_values in
-- db/functions): with an Idempotency-Key (key not NULL) a replay returns
-- the stored row, whose id is not the one proposed. A taken email or
-- external id fails with a unique violation; ContactConflict then names the
-- holder.
-- name: ContactCreate :one
SELECT * FROM contact_create_values(@workspace_id, @client_id, @path, sqlc.narg(key), sqlc.narg(request_hash),
                             sqlc.narg(lock_key), sqlc.narg(fresh_since), @id, sqlc.narg(email), sqlc.narg(phone),
                             sqlc.narg(first_name), sqlc.narg(last_name), sqlc.narg(company_name),
                             sqlc.narg(job_title), sqlc.narg(external_id), sqlc.narg(custom_fields)::jsonb);

-- ContactConflict names the contact holding an email or external id,
-- preferring the email's holder, other than exclude_id (the contact being
-- updated). IS TRUE: a holder without an email compares NULL, which would
-- lead a descending order.
-- name: ContactConflict :one
SELECT id, ((email = sqlc.narg(email)) IS TRUE)::boolean AS by_email FROM contacts
WHERE workspace_id = @workspace_id
  AND (email = sqlc.narg(email) OR external_id = sqlc.narg(external_id))
  AND (sqlc.narg(exclude_id)::uuid IS NULL OR id <> sqlc.narg(exclude_id))
ORDER BY (email = sqlc.narg(email)) IS TRUE DESC
LIMIT 1;

-- name: ContactGet :one
SELECT * FROM contacts WHERE workspace_id = @workspace_id AND id = @id;

-- ContactGetForUpdate is ContactGet for the last round of an update that
-- kept losing races: it locks the row until the transaction ends, so the
-- update that follows cannot lose. NO KEY UPDATE, as the UPDATE itself
-- takes, does not hold up creates of leads about the contact.
-- name: ContactGetForUpdate :one
SELECT * FROM contacts WHERE workspace_id = @workspace_id AND id = @id FOR NO KEY UPDATE;

-- ContactUpdate writes every field of a contact the handler merged from
-- the row it read, provided the row has not changed since (its change_xid
-- is still expected_xid); no row means it has, or it is gone. The trigger
-- of migration 00011 moves change_xid. Custom values are written as
-- LeadUpdate writes them: live_keys NULL keeps them, and deleted fields'
-- values stay as the row holds them now.
-- name: ContactUpdate :one
UPDATE contacts
SET email = sqlc.narg(email), phone = sqlc.narg(phone), first_name = sqlc.narg(first_name),
    last_name = sqlc.narg(last_name), company_name = sqlc.narg(company_name), job_title = sqlc.narg(job_title),
    external_id = sqlc.narg(external_id),
    custom_fields = CASE WHEN sqlc.narg(live_keys)::text[] IS NULL THEN contacts.custom_fields
                         ELSE nullif(coalesce(sqlc.narg(custom_fields)::jsonb, '{}'::jsonb)
                                     || (coalesce(contacts.custom_fields, '{}'::jsonb) - sqlc.narg(live_keys)::text[]), '{}'::jsonb) END,
    updated_at = greatest(now(), updated_at)
WHERE workspace_id = @workspace_id AND id = @id AND change_xid = @expected_xid
RETURNING *;

-- The batch queries take their items as parallel arrays (unnest), which
-- pgx sends in binary: no JSON to parse. Ids travel as text arrays, which
-- pgx encodes natively (a []uuid.UUID goes through driver.Valuer element by
-- element, and was a third of a batch's CPU in the server). An array
-- element cannot be NULL here, so an empty string stands for a NULL text
-- and the nil UUID for a NULL uuid; no valid value is either (empty text is
-- "not sent" everywhere).

-- ContactCreateMany inserts the contacts of a batch in the one order in
-- which every write of ours takes contact locks: by normalised email, then
-- (contacts without one) by external id, then input order. Two batches
-- with the same new emails in opposite orders then wait for each other at
-- most once instead of deadlocking. Items whose email or external id is
-- taken, by an existing contact or an item inserted before them, are
-- skipped; ContactConflictMany then names the holders.
-- name: ContactCreateMany :many
INSERT INTO contacts (workspace_id, id, email, phone, first_name, last_name, company_name, job_title,
                      external_id, custom_fields, created_at, updated_at)
SELECT @workspace_id, x.id, nullif(x.email, ''), nullif(x.phone, ''), nullif(x.first_name, ''),
       nullif(x.last_name, ''), nullif(x.company_name, ''), nullif(x.job_title, ''), nullif(x.external_id, ''),
       nullif(x.custom_fields, '')::jsonb, now(), now()
FROM (SELECT unnest(@idx::int[]) AS idx,
             unnest(@ids::text[])::uuid AS id,
             unnest(@emails::text[]) AS email,
             unnest(@phones::text[]) AS phone,
             unnest(@first_names::text[]) AS first_name,
             unnest(@last_names::text[]) AS last_name,
             unnest(@company_names::text[]) AS company_name,
             unnest(@job_titles::text[]) AS job_title,
             unnest(@external_ids::text[]) AS external_id,
             unnest(@custom_fields::text[]) AS custom_fields) AS x
ORDER BY nullif(x.email, '') NULLS LAST, CASE WHEN x.email = '' THEN x.external_id END, x.idx
ON CONFLICT DO NOTHING
RETURNING *;

-- ContactConflictMany names, for each item (idx), the contact holding its
-- email or else its external id (as ContactConflict does).
-- name: ContactConflictMany :many
SELECT DISTINCT ON (x.idx) x.idx::int AS idx, c.id AS existing_id,
       ((c.email = nullif(x.email, '')) IS TRUE)::boolean AS by_email
FROM (SELECT unnest(@idx::int[]) AS idx,
             unnest(@emails::text[]) AS email,
             unnest(@external_ids::text[]) AS external_id) AS x
LEFT JOIN contacts c ON c.workspace_id = @workspace_id
                    AND (c.email = nullif(x.email, '') OR c.external_id = nullif(x.external_id, ''))
ORDER BY x.idx, (c.email = nullif(x.email, '')) IS TRUE DESC;

-- ContactListChanges is the sync walk (sort=updatedAt): contacts in the
-- order their changes became visible, (change_xid, id), and only below the
-- snapshot's xmin, so that no change can still appear behind the position
-- (see migration 00011). The cursor is refused (SQLSTATE PH410) when it may
-- point past the database's history, and the page tells where it was read,
-- for the cursors it makes (migration 00108); both in this one statement,
-- on this one server.
-- name: ContactListChanges :many
SELECT sqlc.embed(contacts),
       coalesce((SELECT partner_history_timeline()), 0)::int AS history_timeline,
       coalesce((SELECT partner_history_position()), 0)::bigint AS history_position
FROM contacts
WHERE workspace_id = @workspace_id
  AND partner_history_check(sqlc.narg(after_xid)::bigint, sqlc.narg(after_timeline)::int, sqlc.narg(after_position)::bigint)
  AND change_xid < partner_sync_horizon()
  AND (sqlc.narg(after_xid)::bigint IS NULL
       OR (change_xid, id) > (sqlc.narg(after_xid)::bigint, sqlc.narg(after_id)::uuid))
  AND (sqlc.narg(created_since)::timestamptz IS NULL OR created_at >= sqlc.narg(created_since))
  AND (sqlc.narg(updated_since)::timestamptz IS NULL OR updated_at >= sqlc.narg(updated_since))
  AND (sqlc.narg(email)::text IS NULL OR email = sqlc.narg(email))
  AND (sqlc.narg(external_id)::text IS NULL OR external_id = sqlc.narg(external_id))
  AND (sqlc.narg(custom_eq)::jsonb IS NULL OR custom_fields @> sqlc.narg(custom_eq)::jsonb)
  AND (coalesce(cardinality(@range_keys::text[]), 0) = 0
       OR custom_fields_in_range(custom_fields, @range_keys::text[], @range_types::text[], @range_gte::text[], @range_lte::text[]))
  AND (sqlc.narg(q1)::text IS NULL OR search.contact_folded(email, first_name, last_name, company_name, phone, external_id) LIKE search.like_pattern(sqlc.narg(q1)::text))
  AND (sqlc.narg(q2)::text IS NULL OR search.contact_folded(email, first_name, last_name, company_name, phone, external_id) LIKE search.like_pattern(sqlc.narg(q2)::text))
  AND (coalesce(cardinality(@q_rest::text[]), 0) = 0
       OR search.contact_folded(email, first_name, last_name, company_name, phone, external_id) LIKE ALL (SELECT search.like_pattern(w) FROM unnest(@q_rest::text[]) AS w))
ORDER BY change_xid ASC, id ASC
LIMIT @max_rows;

-- The other three ContactList queries differ only in sort key and
-- direction. Each keeps a fixed ORDER BY so that PostgreSQL walks an index
-- on (workspace_id, sort key, id); the optional filters fold away because
-- the pool plans every statement with its actual parameters (see db.Open).

-- name: ContactListCreatedAsc :many
SELECT * FROM contacts
WHERE workspace_id = @workspace_id
  AND (sqlc.narg(after_time)::timestamptz IS NULL
       OR (created_at, id) > (sqlc.narg(after_time)::timestamptz, sqlc.narg(after_id)::uuid))
  AND (sqlc.narg(created_since)::timestamptz IS NULL OR created_at >= sqlc.narg(created_since))
  AND (sqlc.narg(updated_since)::timestamptz IS NULL OR updated_at >= sqlc.narg(updated_since))
  AND (sqlc.narg(email)::text IS NULL OR email = sqlc.narg(email))
  AND (sqlc.narg(external_id)::text IS NULL OR external_id = sqlc.narg(external_id))
  AND (sqlc.narg(custom_eq)::jsonb IS NULL OR custom_fields @> sqlc.narg(custom_eq)::jsonb)
  AND (coalesce(cardinality(@range_keys::text[]), 0) = 0
       OR custom_fields_in_range(custom_fields, @range_keys::text[], @range_types::text[], @range_gte::text[], @range_lte::text[]))
  AND (sqlc.narg(q1)::text IS NULL OR search.contact_folded(email, first_name, last_name, company_name, phone, external_id) LIKE search.like_pattern(sqlc.narg(q1)::text))
  AND (sqlc.narg(q2)::text IS NULL OR search.contact_folded(email, first_name, last_name, company_name, phone, external_id) LIKE search.like_pattern(sqlc.narg(q2)::text))
  AND (coalesce(cardinality(@q_rest::text[]), 0) = 0
       OR search.contact_folded(email, first_name, last_name, company_name, phone, external_id) LIKE ALL (SELECT search.like_pattern(w) FROM unnest(@q_rest::text[]) AS w))
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
  AND (sqlc.narg(custom_eq)::jsonb IS NULL OR custom_fields @> sqlc.narg(custom_eq)::jsonb)
  AND (coalesce(cardinality(@range_keys::text[]), 0) = 0
       OR custom_fields_in_range(custom_fields, @range_keys::text[], @range_types::text[], @range_gte::text[], @range_lte::text[]))
  AND (sqlc.narg(q1)::text IS NULL OR search.contact_folded(email, first_name, last_name, company_name, phone, external_id) LIKE search.like_pattern(sqlc.narg(q1)::text))
  AND (sqlc.narg(q2)::text IS NULL OR search.contact_folded(email, first_name, last_name, company_name, phone, external_id) LIKE search.like_pattern(sqlc.narg(q2)::text))
  AND (coalesce(cardinality(@q_rest::text[]), 0) = 0
       OR search.contact_folded(email, first_name, last_name, company_name, phone, external_id) LIKE ALL (SELECT search.like_pattern(w) FROM unnest(@q_rest::text[]) AS w))
ORDER BY created_at DESC, id DESC
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
  AND (sqlc.narg(custom_eq)::jsonb IS NULL OR custom_fields @> sqlc.narg(custom_eq)::jsonb)
  AND (coalesce(cardinality(@range_keys::text[]), 0) = 0
       OR custom_fields_in_range(custom_fields, @range_keys::text[], @range_types::text[], @range_gte::text[], @range_lte::text[]))
  AND (sqlc.narg(q1)::text IS NULL OR search.contact_folded(email, first_name, last_name, company_name, phone, external_id) LIKE search.like_pattern(sqlc.narg(q1)::text))
  AND (sqlc.narg(q2)::text IS NULL OR search.contact_folded(email, first_name, last_name, company_name, phone, external_id) LIKE search.like_pattern(sqlc.narg(q2)::text))
  AND (coalesce(cardinality(@q_rest::text[]), 0) = 0
       OR search.contact_folded(email, first_name, last_name, company_name, phone, external_id) LIKE ALL (SELECT search.like_pattern(w) FROM unnest(@q_rest::text[]) AS w))
ORDER BY updated_at DESC, id DESC
LIMIT @max_rows;

-- ContactListNewest is the default list (sort=-createdAt) with no filter:
-- its plan does not depend on the values, so unlike the lists above it is
-- prepared once per connection and cached (db.DB.Conn) instead of planned
-- on every execution, which was half of PostgreSQL's time per page. The
-- first page passes the end of time as its position.
-- name: ContactListNewest :many
SELECT * FROM contacts
WHERE workspace_id = @workspace_id
  AND (created_at, id) < (@after_time::timestamptz, @after_id::uuid)
ORDER BY created_at DESC, id DESC
LIMIT @max_rows;

-- ContactGetForDelete locks the contact for its deletion. FOR UPDATE, not
-- NO KEY UPDATE: a concurrent lead create's foreign-key check (KEY SHARE)
-- then waits for the delete and finds no contact, instead of adding a lead
-- to a contact that is going.
-- name: ContactGetForDelete :one
SELECT * FROM contacts WHERE workspace_id = @workspace_id AND id = @id FOR UPDATE;

-- name: ContactDelete :exec
DELETE FROM contacts WHERE workspace_id = @workspace_id AND id = @id;

-- ContactDefaultTitle is the title a lead made with the contact and no
-- title of its own took (lead_default_title), before the contact is
-- erased: its copies are found by it.
-- name: ContactDefaultTitle :one
SELECT lead_default_title(first_name, last_name, email, phone)::text AS title
FROM contacts WHERE workspace_id = @workspace_id AND id = @id;
