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
