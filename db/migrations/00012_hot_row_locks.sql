-- +goose Up

-- Every insert into contacts or leads checked its foreign key to
-- workspaces, which takes FOR KEY SHARE on the workspace's row: concurrent
-- creates of one workspace then all lock the same row, which PostgreSQL
-- turns into a multixact that each of them rewrites (the same contention
-- migration 00003 removed from token issuance). The key protects nothing
-- the code does not already guarantee: the workspace id of every write is
-- the authenticated client's, and workspaces are never deleted. A lead
-- keeps its key to its contact, whose existence the code relies on.
ALTER TABLE contacts DROP CONSTRAINT contacts_workspace_id_fkey;
ALTER TABLE leads DROP CONSTRAINT leads_workspace_id_fkey;

-- +goose Down
ALTER TABLE leads ADD FOREIGN KEY (workspace_id) REFERENCES workspaces (id);
ALTER TABLE contacts ADD FOREIGN KEY (workspace_id) REFERENCES workspaces (id);
