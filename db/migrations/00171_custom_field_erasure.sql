-- +goose Up

-- The background erasure of a deleted custom field's values (issue 35;
-- product.md "Custom fields": erased within 24 h, in bounded steps; the
-- job is service/customfield's Erase). It walks the workspace's records
-- of the field's object in primary key order, a bounded batch per
-- statement, and keeps its place here so that a restart or another
-- replica resumes rather than starts over: the id of the last record
-- whose value it has removed, NULL before the first batch. The previous
-- release never reads custom_fields.
ALTER TABLE custom_fields ADD COLUMN erased_through uuid;

-- +goose Down
ALTER TABLE custom_fields DROP COLUMN erased_through;
