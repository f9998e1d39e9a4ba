-- +goose Up
-- members_id lets an operator name a member by id alone
-- (MemberSetSettingsAccess): the primary key (workspace_id, id) cannot
-- find one without its workspace. Member ids are UUIDv7, unique in
-- practice; the index is not UNIQUE so that members can still be
-- distributed by workspace_id (docs/operations.md, "Past one PostgreSQL").
CREATE INDEX members_id ON members (id);

-- +goose Down
DROP INDEX members_id;
