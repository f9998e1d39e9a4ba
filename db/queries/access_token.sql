-- AccessTokenCreate stores a token with the secret generation its client's
-- secret was verified against.
-- name: AccessTokenCreate :exec
INSERT INTO access_tokens (token_hash, workspace_id, client_id, scopes, created_at, expires_at, secret_generation)
VALUES (@token_hash, @workspace_id, @client_id, @scopes, @created_at, @expires_at, @secret_generation);

-- AccessTokenVerify loads everything a bearer check and GET /api/v1/me need.
-- It is keyed by the token hash alone: the hash is the credential. A token
-- is current only while its client's secret is still the one it was issued
-- against (secret_current), and it carries the client's own rate limits.
-- name: AccessTokenVerify :one
SELECT t.workspace_id, t.client_id, t.scopes, t.expires_at, t.revoked_at,
       (t.secret_generation = c.secret_generation)::boolean AS secret_current,
       c.status AS client_status, c.name AS client_name, c.read_rate, c.write_rate,
       w.name AS workspace_name
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
-- concurrent token requests share one commit (see service/token).
-- name: AccessTokenCreateMany :exec
INSERT INTO access_tokens (token_hash, workspace_id, client_id, scopes, created_at, expires_at, secret_generation)
SELECT t.token_hash, t.workspace_id, t.client_id, string_to_array(t.scopes, ' '), t.created_at, t.expires_at, t.secret_generation
FROM (SELECT unnest(@token_hashes::bytea[]) AS token_hash,
             unnest(@workspace_ids::uuid[]) AS workspace_id,
             unnest(@client_ids::uuid[]) AS client_id,
             unnest(@scopes::text[]) AS scopes,
             unnest(@created_ats::timestamptz[]) AS created_at,
             unnest(@expires_ats::timestamptz[]) AS expires_at,
             unnest(@secret_generations::bigint[]) AS secret_generation) AS t;

-- AccessTokenDeleteExpired deletes at most max_rows tokens that expired
-- before the given time, oldest first; the retention sweep calls it until
-- a run's budget is spent.
-- name: AccessTokenDeleteExpired :execrows
DELETE FROM access_tokens
WHERE token_hash IN (SELECT e.token_hash FROM access_tokens AS e
                     WHERE e.expires_at < @before::timestamptz ORDER BY e.expires_at LIMIT @max_rows);
