-- +goose Up

-- Token issuance is the hottest write. The foreign key to api_clients made
-- every INSERT take a FOR KEY SHARE lock on the client's row, so concurrent
-- issuance for one client serialised on a multixact. Tokens are only ever
-- inserted by the token endpoint right after it authenticated the client,
-- and clients are never deleted (revocation is a status), so the key
-- protected nothing the code does not already guarantee.
ALTER TABLE access_tokens DROP CONSTRAINT access_tokens_workspace_id_client_id_fkey;

-- +goose Down
ALTER TABLE access_tokens ADD FOREIGN KEY (workspace_id, client_id) REFERENCES api_clients (workspace_id, id);
