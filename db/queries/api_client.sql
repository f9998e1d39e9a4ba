-- name: APIClientCreate :one
INSERT INTO api_clients (workspace_id, id, name, secret_hash, scopes, redirect_uris, created_by, read_rate, write_rate)
VALUES (@workspace_id, @id, @name, @secret_hash, @scopes, @redirect_uris, @created_by,
        sqlc.narg(read_rate)::integer, sqlc.narg(write_rate)::integer)
RETURNING *;

-- APIClientAuthenticate is the token endpoint's lookup. It is keyed by the
-- client id alone because the caller's workspace is not known yet.
-- name: APIClientAuthenticate :one
SELECT workspace_id, id, name, secret_hash, secret_generation, scopes, status, read_rate, write_rate
FROM api_clients WHERE id = @id;

-- APIClientWorkspace finds the workspace of a client id, for the admin
-- service's permission check.
-- name: APIClientWorkspace :one
SELECT workspace_id FROM api_clients WHERE id = @id;

-- APIClientGetForUpdate reads a client for an admin change and locks its
-- row until the transaction ends, so that concurrent changes of one client
-- run one after the other: a deactivate that read the client before a
-- revocation committed would otherwise set "inactive" over "revoked".
-- NO KEY: like the UPDATE that follows, it does not hold up foreign key
-- checks of rows that reference the client.
-- name: APIClientGetForUpdate :one
SELECT * FROM api_clients WHERE workspace_id = @workspace_id AND id = @id
FOR NO KEY UPDATE;

-- name: APIClientList :many
SELECT * FROM api_clients WHERE workspace_id = @workspace_id
ORDER BY created_at DESC, id DESC;

-- name: APIClientSetStatus :one
UPDATE api_clients
SET status = @status,
    revoked_at = CASE WHEN @status::text = 'revoked' THEN now() ELSE revoked_at END
WHERE workspace_id = @workspace_id AND id = @id
RETURNING *;

-- APIClientSetSecret replaces the secret and moves to the next secret
-- generation, which invalidates every token issued against the old one
-- (see migration 00020).
-- name: APIClientSetSecret :one
UPDATE api_clients
SET secret_hash = @secret_hash, secret_generation = secret_generation + 1, secret_rotated_at = now()
WHERE workspace_id = @workspace_id AND id = @id
RETURNING *;

-- APIClientEndTokens moves the client to the next secret generation and
-- keeps its secret: every token issued before, even one whose batched
-- INSERT commits after this statement, is no longer current (see
-- APIClientSetSecret), so activating the client later does not bring
-- such a token back. The api_clients trigger tells every replica's cache.
-- name: APIClientEndTokens :one
UPDATE api_clients
SET secret_generation = secret_generation + 1
WHERE workspace_id = @workspace_id AND id = @id
RETURNING *;

-- APIClientSetRates sets the client's own rates; NULL is the server
-- default.
-- name: APIClientSetRates :one
UPDATE api_clients
SET read_rate = sqlc.narg(read_rate)::integer, write_rate = sqlc.narg(write_rate)::integer
WHERE workspace_id = @workspace_id AND id = @id
RETURNING *;

-- APIClientTouch records last use for a batch of clients in one statement.
-- It never moves last_used_at backwards.
-- name: APIClientTouch :exec
UPDATE api_clients AS c
SET last_used_at = u.used_at
FROM (SELECT unnest(@workspace_ids::uuid[]) AS workspace_id,
             unnest(@ids::uuid[]) AS id,
             unnest(@used_ats::timestamptz[]) AS used_at) AS u
WHERE c.workspace_id = u.workspace_id AND c.id = u.id
  AND (c.last_used_at IS NULL OR c.last_used_at < u.used_at);
