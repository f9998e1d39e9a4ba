-- +goose Up
-- members_id lets an operator name a member by id alone
-- (MemberSetSettingsAccess): member ids are UUIDv7, unique across
-- workspaces, and the primary key (workspace_id, id) cannot find one
-- without its workspace.
CREATE UNIQUE INDEX members_id ON members (id);

-- +goose Down
DROP INDEX members_id;
