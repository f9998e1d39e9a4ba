-- Every lead create runs lead_create_item_set (db/functions), the one
-- find-or-create of a lead's contact: a batch's items through LeadCreateSet,
-- single creates (alone or sharing a commit) through LeadCreateRequests.
-- Items travel as JSON, read as lead_create_item by name, so that an
-- unset field is null; each answers one lead_create_item_outcome.

-- LeadCreateRequests runs single creates, each with its own workspace and
-- Idempotency-Key, in one statement (see lead_create_item_requests): one
-- outcome per request, in input order. lock_budget_ms bounds a group's
-- lock waits together; NULL runs them under the role's lock_timeout.
-- name: LeadCreateRequests :many
SELECT * FROM lead_create_item_requests(
    ARRAY(SELECT jsonb_populate_recordset(NULL::lead_create_item, @requests::jsonb)),
    sqlc.narg(lock_budget_ms)::int);

-- LeadCreateSet creates the items of a batch, all of one workspace, in the
-- batch's transaction (its key is the batch's: see idempotency.InTx): one
-- outcome per item, in input order.
-- name: LeadCreateSet :many
SELECT * FROM lead_create_item_set(@workspace_id,
    ARRAY(SELECT jsonb_populate_recordset(NULL::lead_create_item, @items::jsonb)));

-- LeadCreate is LeadCreateRequests for one request alone, under the
-- role's lock_timeout, its fields sent as parameters. Its parameters, in
-- order, are the attributes of lead_create_item, and so the fields of
-- every create (dbsqlc.LeadCreateParams).
-- name: LeadCreate :one
SELECT * FROM lead_create_item_requests(ARRAY[ROW(
    @workspace_id::uuid, @client_id::uuid, @path::text, sqlc.narg(key)::text,
    encode(sqlc.narg(request_hash)::bytea, 'base64'), sqlc.narg(lock_key)::bigint,
    sqlc.narg(fresh_since)::timestamptz, @id::uuid, sqlc.narg(contact_id)::uuid, @contact_new_id::uuid,
    sqlc.narg(contact_email)::text, sqlc.narg(contact_phone)::text, sqlc.narg(contact_first_name)::text,
    sqlc.narg(contact_last_name)::text, sqlc.narg(contact_company_name)::text,
    sqlc.narg(contact_job_title)::text, sqlc.narg(title)::text, @status::text, sqlc.narg(source)::text,
    sqlc.narg(campaign)::text, sqlc.narg(message)::text, sqlc.narg(value_amount)::bigint,
    sqlc.narg(value_currency)::text, sqlc.narg(external_id)::text, sqlc.narg(custom_fields)::jsonb,
    sqlc.narg(contact_custom_fields)::jsonb)::lead_create_item], NULL);

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
--
-- Custom values: with live_keys NULL the stored values stay as they are;
-- else the values of those keys (every live field's) become custom_fields,
-- and the stored values of other keys stay as the row holds them now, not
-- as the handler read them. Those are deleted fields' values, which the
-- erasure removes without moving change_xid: written back from the read,
-- one would outlive the erasure's walk.
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
    custom_fields = CASE WHEN sqlc.narg(live_keys)::text[] IS NULL THEN leads.custom_fields
                         ELSE nullif(coalesce(sqlc.narg(custom_fields)::jsonb, '{}'::jsonb)
                                     || (coalesce(leads.custom_fields, '{}'::jsonb) - sqlc.narg(live_keys)::text[]), '{}'::jsonb) END,
    updated_at = greatest(now(), leads.updated_at)
WHERE leads.workspace_id = @workspace_id AND leads.id = @id AND leads.change_xid = @expected_xid
RETURNING *;

-- LeadListChanges is the sync walk (sort=updatedAt): leads in the order
-- their changes became visible, (change_xid, id), and only below the
-- snapshot's xmin, so that no change can still appear behind the position
-- (see migration 00011). The cursor is refused (SQLSTATE PH410) when it may
-- point past the database's history, and the page tells where it was read,
-- for the cursors it makes (migration 00108); both in this one statement,
-- on this one server.
-- name: LeadListChanges :many
SELECT sqlc.embed(leads),
       coalesce((SELECT partner_history_timeline()), 0)::int AS history_timeline,
       coalesce((SELECT partner_history_position()), 0)::bigint AS history_position
FROM leads
WHERE workspace_id = @workspace_id
  AND partner_history_check(sqlc.narg(after_xid)::bigint, sqlc.narg(after_timeline)::int, sqlc.narg(after_position)::bigint)
  AND change_xid < partner_sync_horizon()
  AND (sqlc.narg(after_xid)::bigint IS NULL
       OR (change_xid, id) > (sqlc.narg(after_xid)::bigint, sqlc.narg(after_id)::uuid))
  AND (sqlc.narg(created_since)::timestamptz IS NULL OR created_at >= sqlc.narg(created_since))
  AND (sqlc.narg(updated_since)::timestamptz IS NULL OR updated_at >= sqlc.narg(updated_since))
  AND (sqlc.narg(contact_id)::uuid IS NULL OR contact_id = sqlc.narg(contact_id))
  AND (sqlc.narg(status)::text IS NULL OR status = sqlc.narg(status))
  AND (sqlc.narg(source)::text IS NULL OR source = sqlc.narg(source))
  AND (sqlc.narg(external_id)::text IS NULL OR external_id = sqlc.narg(external_id))
  AND (sqlc.narg(custom_eq)::jsonb IS NULL OR custom_fields @> sqlc.narg(custom_eq)::jsonb)
  AND (coalesce(cardinality(@range_keys::text[]), 0) = 0
       OR custom_fields_in_range(custom_fields, @range_keys::text[], @range_types::text[], @range_gte::text[], @range_lte::text[]))
  AND (sqlc.narg(q1)::text IS NULL OR search.lead_folded(title, campaign, source, external_id) LIKE search.like_pattern(sqlc.narg(q1)::text))
  AND (sqlc.narg(q2)::text IS NULL OR search.lead_folded(title, campaign, source, external_id) LIKE search.like_pattern(sqlc.narg(q2)::text))
  AND (coalesce(cardinality(@q_rest::text[]), 0) = 0
       OR search.lead_folded(title, campaign, source, external_id) LIKE ALL (SELECT search.like_pattern(w) FROM unnest(@q_rest::text[]) AS w))
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
  AND (sqlc.narg(custom_eq)::jsonb IS NULL OR custom_fields @> sqlc.narg(custom_eq)::jsonb)
  AND (coalesce(cardinality(@range_keys::text[]), 0) = 0
       OR custom_fields_in_range(custom_fields, @range_keys::text[], @range_types::text[], @range_gte::text[], @range_lte::text[]))
  AND (sqlc.narg(q1)::text IS NULL OR search.lead_folded(title, campaign, source, external_id) LIKE search.like_pattern(sqlc.narg(q1)::text))
  AND (sqlc.narg(q2)::text IS NULL OR search.lead_folded(title, campaign, source, external_id) LIKE search.like_pattern(sqlc.narg(q2)::text))
  AND (coalesce(cardinality(@q_rest::text[]), 0) = 0
       OR search.lead_folded(title, campaign, source, external_id) LIKE ALL (SELECT search.like_pattern(w) FROM unnest(@q_rest::text[]) AS w))
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
  AND (sqlc.narg(custom_eq)::jsonb IS NULL OR custom_fields @> sqlc.narg(custom_eq)::jsonb)
  AND (coalesce(cardinality(@range_keys::text[]), 0) = 0
       OR custom_fields_in_range(custom_fields, @range_keys::text[], @range_types::text[], @range_gte::text[], @range_lte::text[]))
  AND (sqlc.narg(q1)::text IS NULL OR search.lead_folded(title, campaign, source, external_id) LIKE search.like_pattern(sqlc.narg(q1)::text))
  AND (sqlc.narg(q2)::text IS NULL OR search.lead_folded(title, campaign, source, external_id) LIKE search.like_pattern(sqlc.narg(q2)::text))
  AND (coalesce(cardinality(@q_rest::text[]), 0) = 0
       OR search.lead_folded(title, campaign, source, external_id) LIKE ALL (SELECT search.like_pattern(w) FROM unnest(@q_rest::text[]) AS w))
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
  AND (sqlc.narg(custom_eq)::jsonb IS NULL OR custom_fields @> sqlc.narg(custom_eq)::jsonb)
  AND (coalesce(cardinality(@range_keys::text[]), 0) = 0
       OR custom_fields_in_range(custom_fields, @range_keys::text[], @range_types::text[], @range_gte::text[], @range_lte::text[]))
  AND (sqlc.narg(q1)::text IS NULL OR search.lead_folded(title, campaign, source, external_id) LIKE search.like_pattern(sqlc.narg(q1)::text))
  AND (sqlc.narg(q2)::text IS NULL OR search.lead_folded(title, campaign, source, external_id) LIKE search.like_pattern(sqlc.narg(q2)::text))
  AND (coalesce(cardinality(@q_rest::text[]), 0) = 0
       OR search.lead_folded(title, campaign, source, external_id) LIKE ALL (SELECT search.like_pattern(w) FROM unnest(@q_rest::text[]) AS w))
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
  AND (sqlc.narg(custom_eq)::jsonb IS NULL OR custom_fields @> sqlc.narg(custom_eq)::jsonb)
  AND (coalesce(cardinality(@range_keys::text[]), 0) = 0
       OR custom_fields_in_range(custom_fields, @range_keys::text[], @range_types::text[], @range_gte::text[], @range_lte::text[]))
  AND (sqlc.narg(q1)::text IS NULL OR search.lead_folded(title, campaign, source, external_id) LIKE search.like_pattern(sqlc.narg(q1)::text))
  AND (sqlc.narg(q2)::text IS NULL OR search.lead_folded(title, campaign, source, external_id) LIKE search.like_pattern(sqlc.narg(q2)::text))
  AND (coalesce(cardinality(@q_rest::text[]), 0) = 0
       OR search.lead_folded(title, campaign, source, external_id) LIKE ALL (SELECT search.like_pattern(w) FROM unnest(@q_rest::text[]) AS w))
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


-- name: LeadCountForContact :one
SELECT count(*)::int FROM leads WHERE workspace_id = @workspace_id AND contact_id = @contact_id;

-- name: LeadDeleteForContact :many
DELETE FROM leads WHERE workspace_id = @workspace_id AND contact_id = @contact_id RETURNING id;

-- name: LeadDelete :exec
DELETE FROM leads WHERE workspace_id = @workspace_id AND id = @id;

-- LeadRetitleErased gives the leads of the workspace titled erased_title,
-- the default title of a contact being erased (lead_default_title of its
-- fields: what a lead made with it and no title took, and kept when it
-- moved to another contact), their own contact's default title: no lead
-- keeps an erased contact's name, email or phone (product.md, "Deleting
-- records"). Its leads are gone by then; the update writes lead.updated.
-- A lead whose own contact has the same default title (a namesake) keeps
-- it.
-- name: LeadRetitleErased :many
UPDATE leads AS l
SET title = lead_default_title(c.first_name, c.last_name, c.email, c.phone), updated_at = now()
FROM contacts AS c
WHERE l.workspace_id = @workspace_id AND l.title = @erased_title::text
  AND c.workspace_id = l.workspace_id AND c.id = l.contact_id
  AND lead_default_title(c.first_name, c.last_name, c.email, c.phone) <> l.title
RETURNING l.id;
