-- name: AccessTokenCreate :exec
INSERT INTO access_tokens (token_hash, workspace_id, client_id, scopes, created_at, expires_at)
VALUES (@token_hash, @workspace_id, @client_id, @scopes, @created_at, @expires_at);

-- AccessTokenVerify loads everything a bearer check and GET /api/v1/me need.
-- It is keyed by the token hash alone: the hash is the credential.
-- name: AccessTokenVerify :one
SELECT t.workspace_id, t.client_id, t.scopes, t.expires_at, t.revoked_at,
       c.status AS client_status, c.name AS client_name, w.name AS workspace_name
FROM access_tokens t
JOIN api_clients c ON c.workspace_id = t.workspace_id AND c.id = t.client_id
JOIN workspaces w ON w.id = t.workspace_id
WHERE t.token_hash = @token_hash;

-- AccessTokenRevoke revokes one token, only if it belongs to the client.
-- name: AccessTokenRevoke :execrows
UPDATE access_tokens SET revoked_at = now()
WHERE token_hash = @token_hash AND workspace_id = @workspace_id AND client_id = @client_id
  AND revoked_at IS NULL;

-- name: AccessTokenRevokeAllOfClient :execrows
UPDATE access_tokens SET revoked_at = now()
WHERE workspace_id = @workspace_id AND client_id = @client_id AND revoked_at IS NULL;

-- AccessTokenCreateMany inserts a batch of tokens in one statement, so
-- concurrent token requests share one commit (see internal/api/token).
-- name: AccessTokenCreateMany :exec
INSERT INTO access_tokens (token_hash, workspace_id, client_id, scopes, created_at, expires_at)
SELECT t.token_hash, t.workspace_id, t.client_id, string_to_array(t.scopes, ' '), t.created_at, t.expires_at
FROM (SELECT unnest(@token_hashes::bytea[]) AS token_hash,
             unnest(@workspace_ids::uuid[]) AS workspace_id,
             unnest(@client_ids::uuid[]) AS client_id,
             unnest(@scopes::text[]) AS scopes,
             unnest(@created_ats::timestamptz[]) AS created_at,
             unnest(@expires_ats::timestamptz[]) AS expires_at) AS t;
