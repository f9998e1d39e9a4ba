-- +goose Up

-- Gap-free sync. change_xid is the id of the transaction that last wrote
-- the row (pg_current_xact_id(), as a bigint). A sync walk (sort=updatedAt)
-- follows (change_xid, id) and serves only rows whose change_xid is below
-- the xmin of its own snapshot: every transaction with a smaller id has
-- then ended, so no change can still appear behind the walk's position, as
-- one whose updated_at is earlier than rows already served can when its
-- transaction commits late. The cost: while a transaction is open, changes
-- of every later transaction are withheld until it ends.
--
-- Inserts take the column default; updates get it from a trigger, so no
-- write path can forget it. The xid is the top-level one, also inside
-- subtransactions. Existing rows get the id of this migration.

-- +goose StatementBegin
CREATE FUNCTION partner_change_xid() RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT pg_current_xact_id()::text::bigint
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION partner_sync_horizon() RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION partner_touch_change_xid() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.change_xid := pg_current_xact_id()::text::bigint; -- partner_change_xid(), inline
    RETURN NEW;
END
$$;
-- +goose StatementEnd

ALTER TABLE contacts ADD COLUMN change_xid bigint NOT NULL DEFAULT partner_change_xid();
ALTER TABLE leads ADD COLUMN change_xid bigint NOT NULL DEFAULT partner_change_xid();

CREATE INDEX contacts_changes ON contacts (workspace_id, change_xid, id);
CREATE INDEX leads_changes ON leads (workspace_id, change_xid, id);

CREATE TRIGGER contacts_change_xid BEFORE UPDATE ON contacts
    FOR EACH ROW EXECUTE FUNCTION partner_touch_change_xid();
CREATE TRIGGER leads_change_xid BEFORE UPDATE ON leads
    FOR EACH ROW EXECUTE FUNCTION partner_touch_change_xid();

-- +goose Down
DROP TRIGGER leads_change_xid ON leads;
DROP TRIGGER contacts_change_xid ON contacts;
DROP INDEX leads_changes;
DROP INDEX contacts_changes;
ALTER TABLE leads DROP COLUMN change_xid;
ALTER TABLE contacts DROP COLUMN change_xid;
DROP FUNCTION partner_touch_change_xid();
DROP FUNCTION partner_sync_horizon();
DROP FUNCTION partner_change_xid();
