-- Custom field definitions (internal/records/customfield). Every query is
-- scoped by workspace.

-- CustomFieldsLive are the workspace's definitions of one object that are
-- not deleted, oldest first: what values are checked against and answered
-- with.
-- name: CustomFieldsLive :many
SELECT * FROM custom_fields
WHERE workspace_id = @workspace_id AND object = @object AND deleted_at IS NULL
ORDER BY created_at, id;

-- CustomFieldCreate inserts a definition; a key in use (also a deleted
-- field's until its values are erased) is the unique violation of
-- custom_fields_key.
-- name: CustomFieldCreate :one
INSERT INTO custom_fields (workspace_id, id, object, key, label, type, options, required, description)
VALUES (@workspace_id, @id, @object, @key, @label, @type, sqlc.narg(options), @required, sqlc.narg(description))
RETURNING *;

-- CustomFieldsAll are the workspace's definitions of every object that
-- are not deleted, oldest first.
-- name: CustomFieldsAll :many
SELECT * FROM custom_fields
WHERE workspace_id = @workspace_id AND deleted_at IS NULL
ORDER BY created_at, id;

-- CustomFieldGet reads one definition that is not deleted.
-- name: CustomFieldGet :one
SELECT * FROM custom_fields
WHERE workspace_id = @workspace_id AND id = @id AND deleted_at IS NULL;

-- CustomFieldGetForUpdate reads one definition that is not deleted and
-- locks it for a change.
-- name: CustomFieldGetForUpdate :one
SELECT * FROM custom_fields
WHERE workspace_id = @workspace_id AND id = @id AND deleted_at IS NULL
FOR UPDATE;

-- CustomFieldLockObject serializes the creates of one object's
-- definitions in a workspace (a transaction-scoped advisory lock on
-- "custom_fields:<workspace>:<object>"), so that the count against the
-- limit holds.
-- name: CustomFieldLockObject :exec
SELECT pg_advisory_xact_lock(hashtextextended(@lock_key::text, 0));

-- CustomFieldCount counts the object's definitions that are not deleted.
-- name: CustomFieldCount :one
SELECT count(*)::int FROM custom_fields
WHERE workspace_id = @workspace_id AND object = @object AND deleted_at IS NULL;

-- CustomFieldUpdate writes the changeable members of a definition.
-- name: CustomFieldUpdate :one
UPDATE custom_fields
SET label = @label, options = sqlc.narg(options), required = @required, description = sqlc.narg(description), updated_at = now()
WHERE workspace_id = @workspace_id AND id = @id AND deleted_at IS NULL
RETURNING *;

-- CustomFieldMarkDeleted deletes a definition as every answer sees it:
-- its values are hidden at once, its key stays taken until the erasure
-- (CustomFieldErase*) has removed them and CustomFieldPurge the row.
-- name: CustomFieldMarkDeleted :execrows
UPDATE custom_fields SET deleted_at = now(), updated_at = now()
WHERE workspace_id = @workspace_id AND id = @id AND deleted_at IS NULL;

-- CustomFieldContactsHolding counts the workspace's contacts whose value
-- of key is (select) or holds (multiselect) one of values: jsonb's ?|
-- matches a string value and the strings of an array alike.
-- name: CustomFieldContactsHolding :one
SELECT count(*)::int FROM contacts
WHERE workspace_id = @workspace_id AND custom_fields -> @key::text ?| @values::text[];

-- CustomFieldLeadsHolding is CustomFieldContactsHolding of leads.
-- name: CustomFieldLeadsHolding :one
SELECT count(*)::int FROM leads
WHERE workspace_id = @workspace_id AND custom_fields -> @key::text ?| @values::text[];

-- CustomFieldNextDeleted claims a deleted definition whose values are due
-- for erasure (deleted before @deleted_before), locking it so that another
-- replica's job takes another one (SKIP LOCKED), oldest deletion first.
-- name: CustomFieldNextDeleted :one
SELECT * FROM custom_fields
WHERE deleted_at IS NOT NULL AND deleted_at < @deleted_before::timestamptz
ORDER BY deleted_at
LIMIT 1
FOR UPDATE SKIP LOCKED;

-- CustomFieldEraseContacts removes key from the custom_fields of the
-- workspace's next max_rows contacts after after_id (by primary key; all
-- from the first when NULL), NULL when nothing is left, and answers the
-- last id it read (an array of one, empty when there was none: the walk
-- is over) and how many it changed. The caller's transaction suppresses the events and
-- keeps change_xid (partner.defer_events, partner.keep_change_xid):
-- nothing any answer shows changes. updated_at is not touched.
-- name: CustomFieldEraseContacts :one
WITH batch AS (
    SELECT c.id FROM contacts c
    WHERE c.workspace_id = @workspace_id AND (sqlc.narg(after_id)::uuid IS NULL OR c.id > sqlc.narg(after_id)::uuid)
    ORDER BY c.id
    LIMIT @max_rows
), erased AS (
    UPDATE contacts c SET custom_fields = nullif(c.custom_fields - @key::text, '{}'::jsonb)
    FROM batch b
    WHERE c.workspace_id = @workspace_id AND c.id = b.id AND c.custom_fields ? @key::text
    RETURNING c.id
)
SELECT ARRAY(SELECT b.id FROM batch b ORDER BY b.id DESC LIMIT 1)::uuid[] AS last_id,
       (SELECT count(*) FROM erased)::int AS erased;

-- CustomFieldEraseLeads is CustomFieldEraseContacts of leads.
-- name: CustomFieldEraseLeads :one
WITH batch AS (
    SELECT l.id FROM leads l
    WHERE l.workspace_id = @workspace_id AND (sqlc.narg(after_id)::uuid IS NULL OR l.id > sqlc.narg(after_id)::uuid)
    ORDER BY l.id
    LIMIT @max_rows
), erased AS (
    UPDATE leads l SET custom_fields = nullif(l.custom_fields - @key::text, '{}'::jsonb)
    FROM batch b
    WHERE l.workspace_id = @workspace_id AND l.id = b.id AND l.custom_fields ? @key::text
    RETURNING l.id
)
SELECT ARRAY(SELECT b.id FROM batch b ORDER BY b.id DESC LIMIT 1)::uuid[] AS last_id,
       (SELECT count(*) FROM erased)::int AS erased;

-- CustomFieldEraseProgress keeps the erasure's place.
-- name: CustomFieldEraseProgress :exec
UPDATE custom_fields SET erased_through = @erased_through
WHERE workspace_id = @workspace_id AND id = @id AND deleted_at IS NOT NULL;

-- CustomFieldPurge removes a deleted definition whose values are erased,
-- freeing its key.
-- name: CustomFieldPurge :execrows
DELETE FROM custom_fields
WHERE workspace_id = @workspace_id AND id = @id AND deleted_at IS NOT NULL;

-- CustomFieldEraseQuiet makes the rest of the erasure's transaction write
-- no events and keep the records' change_xid (partner_record_events,
-- partner_touch_change_xid): it removes only what no answer shows.
-- name: CustomFieldEraseQuiet :exec
SELECT set_config('partner.defer_events', 'on', true), set_config('partner.keep_change_xid', 'on', true);
